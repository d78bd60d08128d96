#include "ops/math/reduce_grad_like.h"

#include <type_traits>

#include "absl/strings/str_cat.h"
#include "core/half.h"
#include "core/half_rounding.h"
#include "core/op_registry.h"
#include "ops/cwise.h"
#include "ops/math/half_io.h"
#include "ops/math/reduce_mean.h"
#include "ops/math/reduce_sum.h"
#include "ops/math/reduction.h"

namespace ipuflow::ops {
namespace {

// Checks dy against x reduced over `axes`; at run time (both shapes fully
// defined) the check is exact, at build time unknown dims pass.
absl::Status CheckDyShape(const TensorShape& dy, const TensorShape& x,
                          const std::vector<int>& axes) {
  const TensorShape kept = ReducedShape(x, axes, true);
  const TensorShape dropped = ReducedShape(x, axes, false);
  if (dy.IsCompatibleWith(kept) || dy.IsCompatibleWith(dropped)) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "input 'dy' has shape ", dy.DebugString(), " but input 'x' ",
      x.DebugString(), " reduced over its axes has shape ",
      dropped.DebugString(), " (or ", kept.DebugString(), " with kept dims)"));
}

absl::StatusOr<std::vector<int>> Axes(const std::vector<int64_t>& axes,
                                      const TensorShape& x) {
  absl::StatusOr<std::vector<int>> norm =
      NormalizeReductionAxes(axes, x.rank());
  if (!norm.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        norm.status().message(), "; input 'x' has shape ", x.DebugString()));
  }
  return norm;
}

template <typename T>
absl::Status ReduceGradLikeKernel(KernelContext& ctx) {
  const Tensor &dy = ctx.input(0), &x = ctx.input(1);
  absl::StatusOr<std::vector<int>> axes =
      Axes(ctx.attr<std::vector<int64_t>>("axes"), x.shape());
  absl::Status ok =
      axes.ok() ? CheckDyShape(dy.shape(), x.shape(), *axes) : axes.status();
  if (!ok.ok()) return ctx.InvalidArgument(ok.message());
  ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, x.shape()));
  const int64_t n = out->NumElements();
  if (n == 0) return absl::OkStatus();
  const float fscale = static_cast<float>(
      ctx.attr<bool>("mean") ? 1.0 / static_cast<double>(n / dy.NumElements())
                             : 1.0);
  const T scale = static_cast<T>(fscale);
  // Rows of the innermost coalesced dim of x; each row is a copy of dy (a
  // kept dim) or one dy value repeated (a reduced dim).
  const CoalescedShape cs = Coalesce(x.shape(), *axes);
  TensorShape big, small;
  for (size_t i = 0; i < cs.dims.size(); ++i) {
    big.AddDim(cs.dims[i]);
    small.AddDim(cs.reduced[i] ? 1 : cs.dims[i]);
  }
  const int rank = big.rank();
  const int64_t inner = rank == 0 ? 1 : big.dim(rank - 1);
  const bool repeat = rank > 0 && cs.reduced[rank - 1];
  const std::vector<int64_t> strides = BroadcastStrides(small, big);
  const T* pd = dy.data<T>();
  T* po = out->data<T>();
  ctx.ParallelFor(n / inner, kCwiseCost * inner, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      int64_t off = 0, rem = r;
      for (int d = rank - 2; d >= 0; --d) {
        off += (rem % big.dim(d)) * strides[d];
        rem /= big.dim(d);
      }
      if constexpr (std::is_same_v<T, half>) {
        // float32 products (the scale is not itself rounded to float16),
        // rounded once through RoundToHalf.
        ArrayX<float> v(inner);
        if (repeat) {
          v.setConstant(static_cast<float>(pd[off]) * fscale);
        } else {
          WidenFast(pd + off, v.data(), inner);
          v *= fscale;
        }
        RoundToHalf(ctx, 0, v.data(), po + r * inner, inner, r * inner);
        continue;
      }
      ArrayMap<T> row(po + r * inner, inner);
      if (repeat) {
        row.setConstant(static_cast<T>(pd[off] * scale));
      } else {
        row = ConstArrayMap<T>(pd + off, inner) * scale;
      }
    }
  });
  return absl::OkStatus();
}

REGISTER_OP("ReduceGradLike")
    .Input("dy")
    .Input("x")
    .Attr("axes", std::vector<int64_t>{})
    .Attr("mean", false)
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      RETURN_IF_ERROR(c.ExpectFloat(0));
      ASSIGN_OR_RETURN(std::vector<int64_t> attr,
                       c.attr<std::vector<int64_t>>("axes"));
      ASSIGN_OR_RETURN(std::vector<int> axes, Axes(attr, c.input_shape(1)));
      RETURN_IF_ERROR(CheckDyShape(c.input_shape(0), c.input_shape(1), axes));
      c.set_output(0, c.input_dtype(0), c.input_shape(1));
      return absl::OkStatus();
    })
    .SetKernel([](KernelContext& ctx) -> absl::Status {
      IPUFLOW_SWITCH_FLOAT(ctx.input(0).dtype(),
                           return ReduceGradLikeKernel<T>(ctx),
                           return UnsupportedDType(ctx, ctx.input(0).dtype()));
    })
    // out = broadcast(dy) [/ n];  d(dy) = sum [or mean] of the incoming
    // gradient over the axes, shaped like dy;  x: none (only its shape is used)
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> g,
                    std::vector<Output>* dx) {
      const auto& axes = op.attr<std::vector<int64_t>>("axes");
      const bool keep_dims =
          op.input(0).shape().rank() == op.input(1).shape().rank();
      dx->push_back(op.attr<bool>("mean")
                        ? ReduceMean(s, g[0], axes, keep_dims)
                        : ReduceSum(s, g[0], axes, keep_dims));
      dx->push_back(Output());
      return absl::OkStatus();
    });

}  // namespace

Output ReduceGradLike(const Scope& scope, Output dy, Output x,
                      std::vector<int64_t> axes, bool mean) {
  return scope.AddNode("ReduceGradLike", {dy, x},
                       {{"axes", std::move(axes)}, {"mean", mean}});
}

}  // namespace ipuflow::ops
