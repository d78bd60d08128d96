#include "ops/nn/fused_bias_activation.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "core/half.h"
#include "core/half_rounding.h"
#include "core/op_registry.h"
#include "ops/cwise.h"
#include "ops/math/half_io.h"
#include "ops/math/partials_type.h"
#include "ops/math/vector_kernels.h"
#include "ops/nn/conv_small.h"
#include "ops/nn/conv_util.h"
#include "ops/nn/window_2d.h"

namespace ipuflow::ops {
namespace {

using Chain = absl::Span<const Node* const>;

bool FloatOrHalf(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat16;
}

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
int64_t BiasBlockRows(int64_t c) {
  return c > 0 ? std::max<int64_t>(1, 256 / c) : 1;
}

// p[0, n) = act(p + b) for n values starting at a channel 0, with `tiled`
// the bias repeated over whole blocks of rows.
template <bool kRelu>
void BiasActivationRange(float* p, int64_t n, const ArrayX<float>& tiled) {
  const int64_t block = tiled.size();
  const auto add_bias = UsedVectorKernels().add_bias;  // AVX2 or AVX-512.
  for (int64_t i = 0; i < n; i += block) {
    add_bias(p + i, tiled.data(), p + i, std::min(block, n - i), kRelu);
  }
}

// y = act(y + b) in place over [rows, c], b float32 (widened once).
template <bool kRelu>
absl::Status BiasActivationInPlace(KernelContext& ctx, Tensor* y,
                                   const Tensor& bias) {
  const int64_t c = y->rank() == 0 ? 1 : y->dim(y->rank() - 1);
  if (bias.rank() != 1 || bias.dim(0) != c) {
    return ctx.InvalidArgument(
        "input 'bias' has shape ", bias.shape().DebugString(),
        " but the value of shape ", y->shape().DebugString(), " has ", c,
        " channels");
  }
  const Tensor b = AsFloat32(ctx, bias);
  const int64_t rows = c > 0 ? y->NumElements() / c : 0;
  const int64_t block = BiasBlockRows(c);
  const ArrayX<float> tiled =
      ConstArrayMap<float>(b.data<float>(), c).replicate(block, 1);
  const auto add_bias = UsedVectorKernels().add_bias;  // AVX2 or AVX-512.
  if (y->dtype() == DType::kFloat32) {
    float* p = y->data<float>();
    ctx.ParallelFor(rows, kCwiseCost * c, [&](int64_t lo, int64_t hi) {
      for (int64_t r = lo; r < hi; r += block) {
        const int64_t n = std::min(block, hi - r) * c;
        add_bias(p + r * c, tiled.data(), p + r * c, n, kRelu);
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
      add_bias(buf.data(), tiled.data(), buf.data(), n, kRelu);
      RoundToHalf(ctx, 0, buf.data(), p + r * c, n, r * c);
    }
  });
  return absl::OkStatus();
}

// y = max(y, 0) in place (exact in either dtype).
void ReluInPlace(KernelContext& ctx, Tensor* y) {
  const int64_t n = y->NumElements();
  const auto relu = UsedVectorKernels().relu;  // AVX2 or AVX-512.
  if (y->dtype() == DType::kFloat32) {
    float* p = y->data<float>();
    ctx.ParallelFor(n, kCwiseCost,
                    [&](int64_t b, int64_t e) { relu(p + b, p + b, e - b); });
    return;
  }
  half* p = y->data<half>();
  ctx.ParallelFor(n, kCwiseCost, [&](int64_t b, int64_t e) {
    constexpr int64_t kChunk = 1024;
    float buf[kChunk];
    for (int64_t i = b; i < e; i += kChunk) {
      const int64_t m = std::min(kChunk, e - i);
      WidenFast(p + i, buf, m);
      relu(buf, buf, m);
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

// Conv2D -> BiasAdd [-> Relu]. Where Conv2D's kernel would take the direct
// small-channel path (float32, float partials: conv_small.h), the bias and
// activation run on each chunk of output rows as soon as the convolution
// finishes it, in cache: the same arithmetic as the unfused graph, one pass
// over the output fewer. Elsewhere Conv2D's own kernel, then one pass.
template <bool kRelu>
absl::Status ConvBiasKernel(KernelContext& ctx) {
  const Node& conv = *ctx.fused_nodes()[0];
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  const Tensor& bias = ctx.input(2);
  if (x.dtype() == DType::kFloat32 && w.dtype() == DType::kFloat32 &&
      bias.dtype() == DType::kFloat32 && !HalfPartials(conv)) {
    absl::StatusOr<WindowAttrs> a = ParseWindowAttrs(conv.attrs(), false);
    int64_t oc = 0;
    absl::StatusOr<Window2D> g =
        a.ok() ? ConvWindow(x.shape(), w.shape(), *a, &oc) : a.status();
    if (g.ok() && a->format == DataFormat::kNHWC && UseSmallConv(*g, oc) &&
        bias.rank() == 1 && bias.dim(0) == oc) {
      ASSIGN_OR_RETURN(
          Tensor * y,
          ctx.allocate_output(0, TensorShape({g->n, g->oh, g->ow, oc})));
      const ArrayX<float> tiled = ConstArrayMap<float>(bias.data<float>(), oc)
                                      .replicate(BiasBlockRows(oc), 1);
      float* py = y->data<float>();
      const int64_t row = g->ow * oc;
      SmallConvForward(ctx, x.data<float>(), w.data<float>(), py, *g, oc,
                       [&](int64_t r0, int64_t r1) {
                         BiasActivationRange<kRelu>(py + r0 * row,
                                                    (r1 - r0) * row, tiled);
                       });
      return absl::OkStatus();
    }
  }
  return ProducerBiasKernel<kRelu>(ctx, 2);
}

REGISTER_FUSION("Conv2D+BiasAdd")
    .Chain({"Conv2D", "BiasAdd"}, {0})
    .SetApplies(AllChannelsLast)
    .SetKernel(ConvBiasKernel<false>);

REGISTER_FUSION("Conv2D+BiasAdd+Relu")
    .Chain({"Conv2D", "BiasAdd", "Relu"}, {0, 0})
    .SetApplies(AllChannelsLast)
    .SetKernel(ConvBiasKernel<true>);

REGISTER_FUSION("MatMul+BiasAdd")
    .Chain({"MatMul", "BiasAdd"}, {0})
    .SetApplies(AllChannelsLast)
    .SetKernel([](KernelContext& ctx) {
      return ProducerBiasKernel<false>(ctx, 2);
    });

REGISTER_FUSION("MatMul+BiasAdd+Relu")
    .Chain({"MatMul", "BiasAdd", "Relu"}, {0, 0})
    .SetApplies(AllChannelsLast)
    .SetKernel([](KernelContext& ctx) {
      return ProducerBiasKernel<true>(ctx, 2);
    });

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

}  // namespace
}  // namespace ipuflow::ops
