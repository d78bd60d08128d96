// Sqrt: y = sqrt(x), element-wise; float32/float16.
//
//   Output std = ops::Sqrt(scope, variance);
//
// Domain errors are values, not status errors (like numpy): sqrt of a
// negative number is NaN. The gradient at x = 0 is inf.
#ifndef IPUFLOW_OPS_MATH_SQRT_H_
#define IPUFLOW_OPS_MATH_SQRT_H_

#include "core/scope.h"

namespace ipuflow::ops {

Output Sqrt(const Scope& scope, Output x);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_MATH_SQRT_H_
