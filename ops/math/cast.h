// Cast: converts x to `dtype`, element-wise, between float32, float16,
// int32, int64 and bool.
//
//   Output mask = ops::Cast(scope, ops::Equal(scope, a, b), DType::kFloat32);
//   Output n = ops::Cast(scope, logits, DType::kInt32);  // truncates
//
// Conversions follow C++ static_cast: floats to integers truncate toward
// zero (NaN or out-of-range values give an unspecified integer, as in numpy);
// anything to bool is `x != 0` (NaN -> true); bool to numbers is 0 or 1;
// int64 -> int32 wraps; float32 -> float16 rounds to nearest (overflow gives
// inf). Casting to the input's own dtype forwards the input (no copy).
// Differentiable only between the float types.
#ifndef IPUFLOW_OPS_MATH_CAST_H_
#define IPUFLOW_OPS_MATH_CAST_H_

#include "core/scope.h"

namespace ipuflow::ops {

Output Cast(const Scope& scope, Output x, DType dtype);

// The graph collection of the Casts a backward pass makes from a float16
// gradient to float32 (the gradient of a float32 -> float16 Cast). With
// nanoo off an overflow saturates at 65504 in float16 and is an ordinary
// 65504 once cast: GradScaler (optimizers/loss_scaling.h) counts these
// casts' float16 inputs, where the saturation is still visible.
inline constexpr char kFloat16GradientCasts[] = "float16_gradient_casts";

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_MATH_CAST_H_
