#include "ops/nn/bias_add.h"

#include <algorithm>
#include <map>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "core/half_rounding.h"
#include "core/mutex.h"
#include "core/op_registry.h"
#include "core/tensor_eigen.h"
#include "ops/array/fill.h"
#include "ops/cwise.h"
#include "ops/math/half_io.h"
#include "ops/math/vector_kernels.h"

namespace ipuflow::ops {
namespace {

// A value of rank >= 2 seen as [outer, C, inner]: inner == 1 for NHWC.
struct ChannelView {
  int64_t outer, c, inner;
};

absl::StatusOr<int> ChannelDim(const std::string& format, int rank) {
  if (format == "NHWC") return rank - 1;
  if (format == "NCHW") return 1;
  return absl::InvalidArgumentError(absl::StrCat(
      "data_format must be \"NHWC\" or \"NCHW\", got \"", format, "\""));
}

ChannelView ViewOf(const TensorShape& s, int cdim) {
  return {s.DimProduct(0, cdim), s.dim(cdim), s.DimProduct(cdim + 1, s.rank())};
}

absl::Status BiasAddShape(ShapeContext& c) {
  RETURN_IF_ERROR(c.ExpectFloat(0));
  RETURN_IF_ERROR(c.ExpectSameDType(0, 1));
  RETURN_IF_ERROR(c.ExpectRank(1, 1));
  const TensorShape& value = c.input_shape(0);
  ASSIGN_OR_RETURN(std::string format, c.attr<std::string>("data_format"));
  if (value.rank() < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "input 'value' must have rank >= 2, got shape ", value.DebugString()));
  }
  ASSIGN_OR_RETURN(int cdim, ChannelDim(format, value.rank()));
  const int64_t channels = value.dim(cdim), b = c.input_shape(1).dim(0);
  TensorShape out = value;
  if (channels >= 0 && b >= 0 && channels != b) {
    return absl::InvalidArgumentError(absl::StrCat(
        "input 'bias' has shape ", c.input_shape(1).DebugString(),
        " but input 'value' of shape ", value.DebugString(), " has ", channels,
        " channels (dimension ", cdim, " for ", format, ")"));
  }
  if (channels < 0) out.set_dim(cdim, b);
  c.set_output(0, c.input_dtype(0), out);
  return absl::OkStatus();
}

// NHWC rows are short (c = 10 in the ConvNet), too short for one Eigen
// expression each: the kernels work on blocks of whole rows, about
// kBlockValues long, against the bias tiled to one block.
constexpr int64_t kBlockValues = 256;

// Rows per block for c channels (at least 1).
int64_t BlockRows(int64_t c) {
  return c > 0 ? std::max<int64_t>(1, kBlockValues / c) : 1;
}

// y = x + b in float32.
void BiasAddFloat(const KernelContext& ctx, const float* px, const float* pb,
                  float* py, const ChannelView& v) {
  using T = float;
  if (v.inner == 1) {
    const int64_t rows = BlockRows(v.c);
    const ArrayX<T> tiled = ConstArrayMap<T>(pb, v.c).replicate(rows, 1);
    const auto add_bias = UsedVectorKernels().add_bias;  // AVX2 or AVX-512.
    ctx.ParallelFor(v.outer, kCwiseCost * v.c, [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; r += rows) {
        const int64_t n = std::min(rows, e - r) * v.c;
        add_bias(px + r * v.c, tiled.data(), py + r * v.c, n, false);
      }
    });
    return;
  }
  ctx.ParallelFor(
      v.outer * v.c, kCwiseCost * v.inner, [&](int64_t b, int64_t e) {
        for (int64_t p = b; p < e; ++p) {
          ArrayMap<T>(py + p * v.inner, v.inner) =
              ConstArrayMap<T>(px + p * v.inner, v.inner) + pb[p % v.c];
        }
      });
}

// y = x + b for float16: each block of values widened (F16C), added in
// float32 and rounded once through RoundToHalf (so the device's rounding
// mode applies), with no full-size float32 copies.
void BiasAddHalf(const KernelContext& ctx, const half* px, const float* pb,
                 half* py, const ChannelView& v) {
  if (v.inner == 1) {
    const int64_t rows = BlockRows(v.c);
    const ArrayX<float> tiled =
        ConstArrayMap<float>(pb, v.c).replicate(rows, 1);
    const auto add_bias = UsedVectorKernels().add_bias;
    ctx.ParallelFor(v.outer, kCwiseCost * v.c, [&](int64_t b, int64_t e) {
      ArrayX<float> buf(rows * v.c);
      for (int64_t r = b; r < e; r += rows) {
        const int64_t n = std::min(rows, e - r) * v.c;
        WidenFast(px + r * v.c, buf.data(), n);
        add_bias(buf.data(), tiled.data(), buf.data(), n, false);
        RoundToHalf(ctx, 0, buf.data(), py + r * v.c, n, r * v.c);
      }
    });
    return;
  }
  ctx.ParallelFor(v.outer * v.c, kCwiseCost * v.inner,
                  [&](int64_t b, int64_t e) {
                    ArrayX<float> buf(v.inner);
                    for (int64_t p = b; p < e; ++p) {
                      WidenFast(px + p * v.inner, buf.data(), v.inner);
                      buf += pb[p % v.c];
                      RoundToHalf(ctx, 0, buf.data(), py + p * v.inner, v.inner,
                                  p * v.inner);
                    }
                  });
}

absl::Status BiasAddKernel(KernelContext& ctx, const ChannelView& v) {
  const Tensor& x = ctx.input(0);
  const Tensor b = AsFloat32(ctx, ctx.input(1));
  ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.shape()));
  if (x.dtype() == DType::kFloat16) {
    BiasAddHalf(ctx, x.data<half>(), b.data<float>(), y->data<half>(), v);
  } else {
    BiasAddFloat(ctx, x.data<float>(), b.data<float>(), y->data<float>(), v);
  }
  return absl::OkStatus();
}

// One shard's float32 sums of dy over `outer` rows [b, e) for NHWC: blocks
// of rows are summed as tiled vectors, then folded to c channels.
template <typename T>
Eigen::ArrayXf SumRows(const T* p, const ChannelView& v, int64_t b, int64_t e) {
  const int64_t rows = BlockRows(v.c);
  Eigen::ArrayXf tiled = Eigen::ArrayXf::Zero(std::min(rows, e - b) * v.c);
  [[maybe_unused]] Eigen::ArrayXf widened(std::is_same_v<T, half> ? rows * v.c
                                                                  : 0);
  // Each position's sum is in row order whatever the vector width, so the
  // AVX2 and AVX-512 variants give the same bits.
  const auto accumulate = UsedVectorKernels().accumulate;
  for (int64_t r = b; r < e; r += rows) {
    const int64_t n = std::min(rows, e - r) * v.c;
    if constexpr (std::is_same_v<T, half>) {
      WidenFast(p + r * v.c, widened.data(), n);
      accumulate(widened.data(), tiled.data(), n);
    } else {
      accumulate(p + r * v.c, tiled.data(), n);
    }
  }
  return Eigen::Map<const Eigen::MatrixXf>(tiled.data(), v.c,
                                           tiled.size() / v.c)
      .rowwise()
      .sum()
      .array();
}

// Sums dy over `outer` and `inner` in float32; shards' partial sums are
// added in shard order, so the result does not depend on timing.
// float16 dy is widened block by block (F16C) and summed as float32; the
// result is rounded once through RoundToHalf.
template <typename T>
absl::Status BiasAddGradKernel(KernelContext& ctx, const ChannelView& v,
                               const T* p) {
  Mutex mu;
  std::map<int64_t, Eigen::ArrayXf> partials;
  ctx.ParallelFor(v.outer, kCwiseCost * v.c * v.inner,
                  [&](int64_t b, int64_t e) {
                    Eigen::ArrayXf sum = Eigen::ArrayXf::Zero(v.c);
                    if (v.inner == 1 && v.c > 0) {
                      sum = SumRows(p, v, b, e);
                    } else {
                      for (int64_t o = b; o < e; ++o) {
                        for (int64_t ch = 0; ch < v.c; ++ch) {
                          const T* row = p + (o * v.c + ch) * v.inner;
                          if constexpr (std::is_same_v<T, half>) {
                            Eigen::ArrayXf w(v.inner);
                            WidenFast(row, w.data(), v.inner);
                            sum[ch] += w.sum();
                          } else {
                            sum[ch] += ConstArrayMap<T>(row, v.inner).sum();
                          }
                        }
                      }
                    }
                    MutexLock l(&mu);
                    partials.emplace(b, std::move(sum));
                  });
  Eigen::ArrayXf total = Eigen::ArrayXf::Zero(v.c);
  for (const auto& [begin, sum] : partials) total += sum;
  ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, TensorShape({v.c})));
  if (out->dtype() == DType::kFloat16) {
    RoundToHalf(ctx, 0, total.data(), out->data<half>(), v.c);
  } else {
    out->flat<float>() = total;
  }
  return absl::OkStatus();
}

REGISTER_OP("BiasAdd")
    .Input("value")
    .Input("bias")
    .Attr("data_format", "NHWC")
    .SetShapeFn(BiasAddShape)
    .SetKernel([](KernelContext& ctx) -> absl::Status {
      const Tensor& x = ctx.input(0);
      const int cdim =
          *ChannelDim(ctx.attr<std::string>("data_format"), x.rank());
      if (x.dim(cdim) != ctx.input(1).dim(0)) {
        return ctx.InvalidArgument(
            "input 'bias' has shape ", ctx.input(1).shape().DebugString(),
            " but input 'value' of shape ", x.shape().DebugString(), " has ",
            x.dim(cdim), " channels");
      }
      const ChannelView v = ViewOf(x.shape(), cdim);
      return BiasAddKernel(ctx, v);
    })
    // y = value + bias (broadcast along channels):
    //   dvalue = dy;  dbias = dy summed over all but channels (BiasAddGrad)
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      dx->push_back(dy[0]);
      dx->push_back(BiasAddGrad(s, dy[0], op.attr<std::string>("data_format")));
      return absl::OkStatus();
    });

REGISTER_OP("BiasAddGrad")
    .Input("dy")
    .Attr("data_format", "NHWC")
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      RETURN_IF_ERROR(c.ExpectFloat(0));
      const TensorShape& dy = c.input_shape(0);
      if (dy.rank() < 2) {
        return absl::InvalidArgumentError(absl::StrCat(
            "input 'dy' must have rank >= 2, got shape ", dy.DebugString()));
      }
      ASSIGN_OR_RETURN(std::string format, c.attr<std::string>("data_format"));
      ASSIGN_OR_RETURN(int cdim, ChannelDim(format, dy.rank()));
      c.set_output(0, c.input_dtype(0), TensorShape({dy.dim(cdim)}));
      return absl::OkStatus();
    })
    .SetKernel([](KernelContext& ctx) -> absl::Status {
      const Tensor& dy = ctx.input(0);
      const int cdim =
          *ChannelDim(ctx.attr<std::string>("data_format"), dy.rank());
      const ChannelView v = ViewOf(dy.shape(), cdim);
      if (dy.dtype() == DType::kFloat16) {
        return BiasAddGradKernel<half>(ctx, v, dy.data<half>());
      }
      return BiasAddGradKernel<float>(ctx, v, dy.data<float>());
    })
    // db = sum of dy over all but channels;  d/d(dy) = g broadcast along the
    // channels = BiasAdd(zeros like dy, g)
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> g,
                    std::vector<Output>* dx) {
      dx->push_back(BiasAdd(s, ZerosLike(s, op.input(0)), g[0],
                            op.attr<std::string>("data_format")));
      return absl::OkStatus();
    });

}  // namespace

Output BiasAdd(const Scope& scope, Output value, Output bias,
               const std::string& data_format) {
  return scope.AddNode("BiasAdd", {value, bias},
                       {{"data_format", data_format}});
}

Output BiasAddGrad(const Scope& scope, Output dy,
                   const std::string& data_format) {
  return scope.AddNode("BiasAddGrad", {dy}, {{"data_format", data_format}});
}

}  // namespace ipuflow::ops
