// Rsqrt: y = 1 / sqrt(x), element-wise; float32/float16.
//
//   Output inv_std = ops::Rsqrt(scope, ops::Add(scope, variance, epsilon));
//
// Domain errors are values, not status errors (like numpy): rsqrt(0) is
// inf, rsqrt of a negative number is NaN.
#ifndef IPUFLOW_OPS_MATH_RSQRT_H_
#define IPUFLOW_OPS_MATH_RSQRT_H_

#include "core/scope.h"

namespace ipuflow::ops {

Output Rsqrt(const Scope& scope, Output x);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_MATH_RSQRT_H_
