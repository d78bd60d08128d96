// Pow: z = x ^ y, element-wise with numpy broadcasting; float32/float16.
//
//   Output cube = ops::Pow(scope, x, ops::Const(scope, 3.0f));
//
// Domain errors are values, not status errors (like numpy): a negative x
// with a non-integer y gives NaN, 0 ^ -1 gives inf. For integers, Cast first.
// Values are the C library's powf for every element. Gradient: dz/dx is 0
// where y = 0, 0 ^ 0 included (PyTorch's rule; TensorFlow's formula gives
// NaN there); dz/dy is 0 where x <= 0.
#ifndef IPUFLOW_OPS_MATH_POW_H_
#define IPUFLOW_OPS_MATH_POW_H_

#include "core/scope.h"

namespace ipuflow::ops {

Output Pow(const Scope& scope, Output x, Output y);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_MATH_POW_H_
