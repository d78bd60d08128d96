#include "ops/math/broadcast_grad.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/half.h"
#include "core/half_rounding.h"
#include "core/op_registry.h"
#include "ops/cwise.h"
#include "ops/math/scalar_ops.h"

namespace ipuflow::ops {
namespace {

// Visits `big` in rows of its innermost dimension, with each row's offset in
// `small` (broadcast to big's shape) and whether small is contiguous there.
template <typename Fn>
void ForEachBroadcastRow(const TensorShape& small, const TensorShape& big,
                         Fn fn) {
  const int rank = big.rank();
  if (big.num_elements() == 0) return;
  if (rank == 0) {
    fn(0, 0, 1, true);
    return;
  }
  const int64_t inner = big.dim(rank - 1);
  const int64_t rows = big.num_elements() / inner;
  const std::vector<int64_t> s = BroadcastStrides(small, big);
  for (int64_t r = 0; r < rows; ++r) {
    int64_t off = 0, rem = r;
    for (int d = rank - 2; d >= 0; --d) {
      off += (rem % big.dim(d)) * s[d];
      rem /= big.dim(d);
    }
    fn(r * inner, off, inner, s[rank - 1] != 0);
  }
}

absl::Status CheckBroadcastable(ShapeContext& c, int small, int big) {
  absl::StatusOr<TensorShape> b =
      BroadcastShapes(c.input_shape(small), c.input_shape(big));
  if (!b.ok() || !b->IsCompatibleWith(c.input_shape(big))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shape ", c.input_shape(small).DebugString(), " does not broadcast to ",
        c.input_shape(big).DebugString()));
  }
  return absl::OkStatus();
}

// Sums in float32 for float16 (rounded once at the end, by the device's
// rounding), in T otherwise.
template <typename T>
absl::Status SumToShape(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const TensorShape& target = ctx.input(1).shape();
  absl::StatusOr<TensorShape> b = BroadcastShapes(target, x.shape());
  if (!b.ok() || *b != x.shape()) {
    return ctx.InvalidArgument("shape ", target.DebugString(),
                               " does not broadcast to ",
                               x.shape().DebugString());
  }
  ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, target));
  using Acc = AccumType<T>;
  std::vector<Acc> acc(target.num_elements(), Acc(0));
  const T* px = x.data<T>();
  ForEachBroadcastRow(
      target, x.shape(), [&](int64_t xo, int64_t oo, int64_t n, bool full) {
        if (full) {
          ArrayMap<Acc>(acc.data() + oo, n) +=
              ConstArrayMap<T>(px + xo, n).template cast<Acc>();
        } else {
          acc[oo] += ConstArrayMap<T>(px + xo, n).template cast<Acc>().sum();
        }
      });
  if constexpr (std::is_same_v<T, half>) {
    RoundToHalf(ctx, 0, acc.data(), out->data<half>(), out->NumElements(), 0);
  } else {
    std::copy(acc.begin(), acc.end(), out->data<T>());
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status Broadcast(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const TensorShape& target = ctx.input(1).shape();
  absl::StatusOr<TensorShape> b = BroadcastShapes(x.shape(), target);
  if (!b.ok() || *b != target) {
    return ctx.InvalidArgument("shape ", x.shape().DebugString(),
                               " does not broadcast to ", target.DebugString());
  }
  ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, target));
  T* po = out->data<T>();
  const T* px = x.data<T>();
  ForEachBroadcastRow(
      x.shape(), target, [&](int64_t oo, int64_t xo, int64_t n, bool full) {
        if (full) {
          ArrayMap<T>(po + oo, n) = ConstArrayMap<T>(px + xo, n);
        } else {
          ArrayMap<T>(po + oo, n).setConstant(px[xo]);
        }
      });
  return absl::OkStatus();
}

REGISTER_OP("SumToShapeOf")
    .Input("x")
    .Input("like")
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      RETURN_IF_ERROR(CheckBroadcastable(c, 1, 0));
      c.set_output(0, c.input_dtype(0), c.input_shape(1));
      return absl::OkStatus();
    })
    .SetKernel([](KernelContext& ctx) -> absl::Status {
      IPUFLOW_SWITCH_NUMERIC(
          ctx.input(0).dtype(), return SumToShape<T>(ctx),
          return UnsupportedDType(ctx, ctx.input(0).dtype()));
    })
    // y = sum over broadcast dims of x;  dy/dx = broadcast(dy) to x's shape.
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      dx->push_back(BroadcastLike(s, dy[0], op.input(0)));
      dx->push_back(Output());
      return absl::OkStatus();
    });

REGISTER_OP("BroadcastLike")
    .Input("x")
    .Input("like")
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      RETURN_IF_ERROR(CheckBroadcastable(c, 0, 1));
      c.set_output(0, c.input_dtype(0), c.input_shape(1));
      return absl::OkStatus();
    })
    .SetKernel([](KernelContext& ctx) -> absl::Status {
      IPUFLOW_SWITCH_ALL(ctx.input(0).dtype(), return Broadcast<T>(ctx),
                         return UnsupportedDType(ctx, ctx.input(0).dtype()));
    })
    // y = broadcast(x);  dy/dx = dy summed back to x's shape.
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      dx->push_back(SumToShapeOf(s, dy[0], op.input(0)));
      dx->push_back(Output());
      return absl::OkStatus();
    });

}  // namespace

Output SumToShapeOf(const Scope& scope, Output x, Output like) {
  return scope.AddNode("SumToShapeOf", {x, like});
}

Output BroadcastLike(const Scope& scope, Output x, Output like) {
  return scope.AddNode("BroadcastLike", {x, like});
}

Output ReduceGradTo(const Scope& scope, Output grad, Output x) {
  if (grad.valid() && x.valid() && grad.shape().IsFullyDefined() &&
      grad.shape() == x.shape()) {
    return grad;
  }
  return SumToShapeOf(scope, grad, x);
}

}  // namespace ipuflow::ops
