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

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_MATH_CAST_H_
