#include "ops/math/arg_reduce.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "core/half.h"
#include "ops/cwise.h"
#include "ops/math/scalar_ops.h"

namespace ipuflow::ops {
namespace {

// Whether v beats the current best b: larger (smaller for kMin), or the
// first NaN.
template <bool kMin, typename T>
bool Beats(T v, T b) {
  return !IsNaN(b) && ((kMin ? v < b : v > b) || IsNaN(v));
}

// Index of the first extremum of p[0, n). REQUIRES: n >= 1.
template <bool kMin, typename T>
int64_t FirstBest(const T* p, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i) {
    if (Beats<kMin>(p[i], p[best])) best = i;
  }
  return best;
}

template <bool kMin, typename T, typename Index>
void ArgRows(const KernelContext& ctx, const T* px, Index* po, int64_t outer,
             int64_t r, int64_t inner) {
  if (inner == 1) {
    ctx.ParallelFor(outer, kCwiseCost * r, [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o) {
        po[o] = static_cast<Index>(FirstBest<kMin>(px + o * r, r));
      }
    });
    return;
  }
  // Running (best, index) over the rows of contiguous inner blocks.
  constexpr int64_t kBlock = 1024;
  const int64_t blocks = (inner + kBlock - 1) / kBlock;
  ctx.ParallelFor(
      outer * blocks, kCwiseCost * 2 * r * std::min(inner, kBlock),
      [&](int64_t b, int64_t e) {
        for (int64_t u = b; u < e; ++u) {
          const int64_t o = u / blocks, i0 = (u % blocks) * kBlock;
          const int64_t n = std::min(kBlock, inner - i0);
          const T* s = px + o * r * inner + i0;
          ArrayX<T> best = ConstArrayMap<T>(s, n);
          ArrayMap<Index> idx(po + o * inner + i0, n);
          idx.setZero();
          for (int64_t k = 1; k < r; ++k) {
            ConstArrayMap<T> row(s + k * inner, n);
            const Eigen::Array<bool, Eigen::Dynamic, 1> wins = row.binaryExpr(
                best, [](T v, T cur) { return Beats<kMin>(v, cur); });
            idx = wins.select(ArrayX<Index>::Constant(n, static_cast<Index>(k)),
                              idx);
            best = wins.select(row, best);
          }
        }
      });
}

template <bool kMin, typename T>
absl::Status ArgKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() == 0) {
    return ctx.InvalidArgument("input 'x' is a scalar; ",
                               kMin ? "ArgMin" : "ArgMax", " needs rank >= 1");
  }
  absl::StatusOr<int> axis = NormalizeAxis(ctx.attr<int64_t>("axis"), x.rank());
  if (!axis.ok()) return ctx.InvalidArgument(axis.status().message());
  TensorShape shape = x.shape();
  shape.RemoveDim(*axis);
  ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, shape));
  const int64_t r = x.dim(*axis);
  if (y->NumElements() == 0) return absl::OkStatus();
  if (r == 0) {
    return ctx.InvalidArgument("axis ", *axis, " of input 'x' ",
                               x.shape().DebugString(), " is empty: it has no ",
                               kMin ? "minimum" : "maximum");
  }
  const int64_t outer = x.shape().DimProduct(0, *axis);
  const int64_t inner = x.shape().DimProduct(*axis + 1, x.rank());
  if (y->dtype() == DType::kInt32) {
    ArgRows<kMin, T, int32_t>(ctx, x.data<T>(), y->data<int32_t>(), outer, r,
                              inner);
  } else {
    ArgRows<kMin, T, int64_t>(ctx, x.data<T>(), y->data<int64_t>(), outer, r,
                              inner);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ArgReduceShapeFn(ShapeContext& c) {
  const DType dt = c.input_dtype(0);
  if (dt == DType::kBool || dt == DType::kResource) {
    return absl::InvalidArgumentError(absl::StrCat(
        c.InputName(0), " is ", DTypeName(dt), "; expected a numeric type"));
  }
  ASSIGN_OR_RETURN(int64_t axis, c.attr<int64_t>("axis"));
  ASSIGN_OR_RETURN(DType out, c.attr<DType>("output_type"));
  if (out != DType::kInt32 && out != DType::kInt64) {
    return absl::InvalidArgumentError(absl::StrCat(
        "output_type is ", DTypeName(out), "; expected int32 or int64"));
  }
  TensorShape shape = c.input_shape(0);
  if (shape.rank() == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        c.InputName(0), " is a scalar; ", c.op_name(), " needs rank >= 1"));
  }
  ASSIGN_OR_RETURN(int a, NormalizeAxis(axis, shape.rank()));
  if (shape.dim(a) == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("axis ", axis, " of ", c.InputName(0), " ",
                     shape.DebugString(), " is empty: it has no ",
                     c.op_name() == "ArgMin" ? "minimum" : "maximum"));
  }
  shape.RemoveDim(a);
  c.set_output(0, out, shape);
  return absl::OkStatus();
}

absl::Status ArgReduceKernel(KernelContext& ctx, bool min) {
  if (min) {
    IPUFLOW_SWITCH_NUMERIC(ctx.input(0).dtype(),
                           return (ArgKernel<true, T>(ctx)),
                           return UnsupportedDType(ctx, ctx.input(0).dtype()));
  }
  IPUFLOW_SWITCH_NUMERIC(ctx.input(0).dtype(),
                         return (ArgKernel<false, T>(ctx)),
                         return UnsupportedDType(ctx, ctx.input(0).dtype()));
}

}  // namespace ipuflow::ops
