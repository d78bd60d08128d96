// Cos: y = cos(x), element-wise; float32/float16, the C library's cosf
// (exact argument reduction: large x stay accurate). cos(+-inf) = NaN.
//
//   Output y = ops::Cos(scope, x);
#ifndef IPUFLOW_OPS_MATH_COS_H_
#define IPUFLOW_OPS_MATH_COS_H_

#include "core/scope.h"

namespace ipuflow::ops {

Output Cos(const Scope& scope, Output x);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_MATH_COS_H_
