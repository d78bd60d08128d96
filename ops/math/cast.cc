#include "ops/math/cast.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "core/half.h"
#include "core/half_rounding.h"
#include "core/op_registry.h"
#include "ops/cwise.h"

namespace ipuflow::ops {
namespace {

bool Castable(DType d) {
  return IsFloating(d) || IsInteger(d) || d == DType::kBool;
}

template <typename From, typename To>
absl::Status CastKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.shape()));
  const From* px = x.data<From>();
  To* py = y->data<To>();
  ctx.ParallelFor(x.NumElements(), kCwiseCost, [&](int64_t b, int64_t e) {
    ArrayMap<To>(py + b, e - b) =
        ConstArrayMap<From>(px + b, e - b).template cast<To>();
  });
  return absl::OkStatus();
}

// float32 -> float16 rounds as the device does (stochastically with esr,
// NaN or saturation on overflow: core/half_rounding.h); chunks pass their
// first element, so the result does not depend on the chunking.
template <>
absl::Status CastKernel<float, half>(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.shape()));
  const float* px = x.data<float>();
  half* py = y->data<half>();
  ctx.ParallelFor(x.NumElements(), kCwiseCost, [&](int64_t b, int64_t e) {
    RoundToHalf(ctx, 0, px + b, py + b, e - b, b);
  });
  return absl::OkStatus();
}

// Float to integer saturates and NaN becomes 0 (SaturatingToInteger; C++
// leaves the conversion undefined outside the integer's range, and Eigen's
// cast gave INT_MIN). With floating_point_behaviour.inv on, a value the
// integer cannot hold (NaN, an infinity, out of range) is an invalid
// operation and stops the run, as on the IPU (TensorFlow IPU guide,
// "Floating point behaviour"), naming the node and the element.
template <typename From, typename To>
absl::Status FloatToIntegerCast(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.shape()));
  const From* px = x.data<From>();
  To* py = y->data<To>();
  ctx.ParallelFor(x.NumElements(), kCwiseCost, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) py[i] = SaturatingToInteger<To>(px[i]);
  });
  const FloatingPointBehaviour* fp = ctx.env().floating_point;
  if (fp == nullptr || !fp->inv) return absl::OkStatus();
  // 2^31 and 2^63: the first values the integer cannot hold.
  const double limit = -static_cast<double>(std::numeric_limits<To>::min());
  for (int64_t i = 0; i < x.NumElements(); ++i) {
    const double v = static_cast<double>(px[i]);
    if (!(v >= -limit && v < limit)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "floating-point exception (inv): ", ctx.node().DebugName(),
          " input element ", i, " is ", v, ", which ",
          DTypeName(DTypeOf<To>::value), " cannot hold"));
    }
  }
  return absl::OkStatus();
}
template <>
absl::Status CastKernel<float, int32_t>(KernelContext& ctx) {
  return FloatToIntegerCast<float, int32_t>(ctx);
}
template <>
absl::Status CastKernel<float, int64_t>(KernelContext& ctx) {
  return FloatToIntegerCast<float, int64_t>(ctx);
}
template <>
absl::Status CastKernel<half, int32_t>(KernelContext& ctx) {
  return FloatToIntegerCast<half, int32_t>(ctx);
}
template <>
absl::Status CastKernel<half, int64_t>(KernelContext& ctx) {
  return FloatToIntegerCast<half, int64_t>(ctx);
}

template <typename From>
absl::Status CastFrom(KernelContext& ctx) {
  IPUFLOW_SWITCH_ALL(ctx.output_dtype(0), return (CastKernel<From, T>(ctx)),
                     return UnsupportedDType(ctx, ctx.output_dtype(0)));
}

REGISTER_OP("Cast")
    .Input("x")
    .RequiredAttr("dtype", AttrType::kDType)
    .Forwards(0, 0)  // Only when the dtypes are equal; else a new tensor.
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      ASSIGN_OR_RETURN(DType to, c.attr<DType>("dtype"));
      if (!Castable(c.input_dtype(0)) || !Castable(to)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "cannot cast ", c.InputName(0), " from ",
            DTypeName(c.input_dtype(0)), " to ", DTypeName(to),
            "; Cast converts between float32, float16, int32, int64 and "
            "bool"));
      }
      c.set_output(0, to, c.input_shape(0));
      return absl::OkStatus();
    })
    .SetKernel([](KernelContext& ctx) -> absl::Status {
      const Tensor& x = ctx.input(0);
      if (x.dtype() == ctx.output_dtype(0)) {
        ctx.set_output(0, x);
        return absl::OkStatus();
      }
      IPUFLOW_SWITCH_ALL(x.dtype(), return CastFrom<T>(ctx),
                         return UnsupportedDType(ctx, x.dtype()));
    })
    // y = cast(x);  dy/dx = 1 between float types (the gradient is cast
    // back); no gradient flows to or from integers and bool.
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      const Output x = op.input(0);
      const bool floats =
          IsFloating(x.dtype()) && IsFloating(op.output_dtype(0));
      dx->push_back(floats && dy[0].valid() ? Cast(s, dy[0], x.dtype())
                                            : Output());
      // Where a float16 gradient becomes float32 its saturation stops being
      // recognisable: recorded for GradScaler (kFloat16GradientCasts).
      if (dx->back().valid() && dy[0].dtype() == DType::kFloat16 &&
          x.dtype() == DType::kFloat32) {
        s.graph()->AddToCollection(kFloat16GradientCasts, dx->back().node);
      }
      return absl::OkStatus();
    });

}  // namespace

Output Cast(const Scope& scope, Output x, DType dtype) {
  return scope.AddNode("Cast", {x}, {{"dtype", dtype}});
}

}  // namespace ipuflow::ops
