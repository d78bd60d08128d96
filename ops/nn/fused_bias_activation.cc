#include "ops/nn/fused_bias_activation.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "core/half_rounding.h"
#include "core/op_registry.h"
#include "ops/cwise.h"
#include "ops/math/half_io.h"

namespace ipuflow::ops {
namespace {

using Chain = absl::Span<const Node* const>;

bool FloatOrHalf(DType t) { return t == DType::kFloat32 || t == DType::kFloat16; }

// The bias runs over the last dimension: BiasAdd in NHWC, and a producer
// whose output is channels-last (Conv2D in NHWC; MatMul always).
bool ChannelsLast(const Node& n) {
  return !n.has_attr("data_format") ||
         n.attr<std::string>("data_format") == "NHWC";
}

bool AllChannelsLast(Chain chain) {
  for (const Node* n : chain) {
    if (!ChannelsLast(*n) || !FloatOrHalf(n->output_dtype(0))) return false;
  }
  return true;
}

// Rows of c channels per block (about 256 values), as BiasAdd's kernel.
int64_t BlockRows(int64_t c) {
  return c > 0 ? std::max<int64_t>(1, 256 / c) : 1;
}

// y = act(y + b) in place over [rows, c], b float32 (widened once).
template <bool kRelu>
absl::Status BiasActivationInPlace(KernelContext& ctx, Tensor* y,
                                   const Tensor& bias) {
  const int64_t c = y->rank() == 0 ? 1 : y->dim(y->rank() - 1);
  if (bias.rank() != 1 || bias.dim(0) != c) {
    return ctx.InvalidArgument("input 'bias' has shape ",
                               bias.shape().DebugString(), " but the value of shape ",
                               y->shape().DebugString(), " has ", c, " channels");
  }
  const Tensor b = AsFloat32(ctx, bias);
  const int64_t rows = c > 0 ? y->NumElements() / c : 0;
  const int64_t block = BlockRows(c);
  const ArrayX<float> tiled =
      ConstArrayMap<float>(b.data<float>(), c).replicate(block, 1);
  if (y->dtype() == DType::kFloat32) {
    float* p = y->data<float>();
    ctx.ParallelFor(rows, kCwiseCost * c, [&](int64_t lo, int64_t hi) {
      for (int64_t r = lo; r < hi; r += block) {
        const int64_t n = std::min(block, hi - r) * c;
        ArrayMap<float> v(p + r * c, n);
        if constexpr (kRelu) {
          v = (v + tiled.head(n)).max(0.0f);
        } else {
          v += tiled.head(n);
        }
      }
    });
    return absl::OkStatus();
  }
  half* p = y->data<half>();
  ctx.ParallelFor(rows, kCwiseCost * c, [&](int64_t lo, int64_t hi) {
    ArrayX<float> buf(block * c);
    for (int64_t r = lo; r < hi; r += block) {
      const int64_t n = std::min(block, hi - r) * c;
      WidenFast(p + r * c, buf.data(), n);
      buf.head(n) += tiled.head(n);
      if constexpr (kRelu) buf.head(n) = buf.head(n).max(0.0f);
      RoundToHalf(ctx, 0, buf.data(), p + r * c, n, r * c);
    }
  });
  return absl::OkStatus();
}

// y = max(y, 0) in place (exact in either dtype).
void ReluInPlace(KernelContext& ctx, Tensor* y) {
  const int64_t n = y->NumElements();
  if (y->dtype() == DType::kFloat32) {
    float* p = y->data<float>();
    ctx.ParallelFor(n, kCwiseCost, [&](int64_t b, int64_t e) {
      ArrayMap<float>(p + b, e - b) = ConstArrayMap<float>(p + b, e - b).max(0.0f);
    });
    return;
  }
  half* p = y->data<half>();
  ctx.ParallelFor(n, kCwiseCost, [&](int64_t b, int64_t e) {
    constexpr int64_t kChunk = 1024;
    float buf[kChunk];
    for (int64_t i = b; i < e; i += kChunk) {
      const int64_t m = std::min(kChunk, e - i);
      WidenFast(p + i, buf, m);
      ArrayMap<float>(buf, m) = ConstArrayMap<float>(buf, m).max(0.0f);
      NarrowExact(buf, p + i, m);
    }
  });
}

// Producer (inputs 0..num_producer_inputs) -> BiasAdd (the next input) [->
// Relu]: the producer's kernel writes the output, one pass finishes it.
template <bool kRelu>
absl::Status ProducerBiasKernel(KernelContext& ctx, int num_producer_inputs) {
  std::vector<const Tensor*> ins;
  for (int i = 0; i < num_producer_inputs; ++i) ins.push_back(&ctx.input(i));
  ASSIGN_OR_RETURN(Tensor * y, ctx.RunChainKernel(0, ins));
  Tensor* out = ctx.mutable_output(0);
  if (y != out) {  // Cannot happen for these shapes; be safe.
    ASSIGN_OR_RETURN(out, ctx.allocate_output(0, y->shape()));
    std::copy_n(static_cast<const char*>(y->raw_data()), y->TotalBytes(),
                static_cast<char*>(out->raw_data()));
  }
  return BiasActivationInPlace<kRelu>(ctx, out, ctx.input(num_producer_inputs));
}

template <bool kRelu>
absl::Status BiasAddActivationKernel(KernelContext& ctx) {
  // BiasAdd+Relu: no producer kernel; y = relu(x + b) into the output.
  const Tensor& x = ctx.input(0);
  ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.shape()));
  if (y->raw_data() != x.raw_data()) {
    std::copy_n(static_cast<const char*>(x.raw_data()), x.TotalBytes(),
                static_cast<char*>(y->raw_data()));
  }
  return BiasActivationInPlace<kRelu>(ctx, y, ctx.input(1));
}

REGISTER_FUSION("Conv2D+BiasAdd")
    .Chain({"Conv2D", "BiasAdd"}, {0})
    .SetApplies(AllChannelsLast)
    .SetKernel([](KernelContext& ctx) { return ProducerBiasKernel<false>(ctx, 2); });

REGISTER_FUSION("Conv2D+BiasAdd+Relu")
    .Chain({"Conv2D", "BiasAdd", "Relu"}, {0, 0})
    .SetApplies(AllChannelsLast)
    .SetKernel([](KernelContext& ctx) { return ProducerBiasKernel<true>(ctx, 2); });

REGISTER_FUSION("MatMul+BiasAdd")
    .Chain({"MatMul", "BiasAdd"}, {0})
    .SetApplies(AllChannelsLast)
    .SetKernel([](KernelContext& ctx) { return ProducerBiasKernel<false>(ctx, 2); });

REGISTER_FUSION("MatMul+BiasAdd+Relu")
    .Chain({"MatMul", "BiasAdd", "Relu"}, {0, 0})
    .SetApplies(AllChannelsLast)
    .SetKernel([](KernelContext& ctx) { return ProducerBiasKernel<true>(ctx, 2); });

REGISTER_FUSION("BiasAdd+Relu")
    .Chain({"BiasAdd", "Relu"}, {0})
    .SetApplies(AllChannelsLast)
    .SetKernel(BiasAddActivationKernel<true>);

REGISTER_FUSION("MaxPool2D+Relu")
    .Chain({"MaxPool2D", "Relu"}, {0})
    .SetApplies([](Chain chain) {
      return FloatOrHalf(chain[0]->output_dtype(0));
    })
    .SetKernel([](KernelContext& ctx) -> absl::Status {
      ASSIGN_OR_RETURN(Tensor * y, ctx.RunChainKernel(0, {&ctx.input(0)}));
      if (y != ctx.mutable_output(0)) {
        return ctx.Error(absl::StatusCode::kInternal,
                         "MaxPool2D+Relu: the pool's output is not the node's");
      }
      ReluInPlace(ctx, y);
      return absl::OkStatus();
    });

REGISTER_FUSION("ReluGrad+MaxPoolGrad")
    .Chain({"ReluGrad", "MaxPoolGrad"}, {2})
    .SetApplies([](Chain chain) {
      return FloatOrHalf(chain[0]->output_dtype(0));
    })
    .SetKernel([](KernelContext& ctx) -> absl::Status {
      // Inputs: ReluGrad's (dy, y), then MaxPoolGrad's (x, y). The masked
      // gradient goes to the arena slot the compiler planned for this step.
      ASSIGN_OR_RETURN(Tensor * masked,
                       ctx.RunChainKernel(0, {&ctx.input(0), &ctx.input(1)}));
      return ctx.RunChainKernel(1, {&ctx.input(2), &ctx.input(3), masked})
          .status();
    });

}  // namespace
}  // namespace ipuflow::ops
