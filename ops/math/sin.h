// Sin: y = sin(x), element-wise; float32/float16, the C library's sinf
// (exact argument reduction: large x stay accurate). sin(+-inf) = NaN.
//
//   Output y = ops::Sin(scope, x);
#ifndef IPUFLOW_OPS_MATH_SIN_H_
#define IPUFLOW_OPS_MATH_SIN_H_

#include "core/scope.h"

namespace ipuflow::ops {

Output Sin(const Scope& scope, Output x);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_MATH_SIN_H_
