// Mul: z = x * y, element-wise with numpy broadcasting.
//
//   Output scaled = ops::Mul(scope, x, gamma);  // [N,C] * [C] -> [N,C]
//   Output half = ops::Mul(scope, x, ops::Const(scope, 0.5f));
#ifndef IPUFLOW_OPS_MATH_MUL_H_
#define IPUFLOW_OPS_MATH_MUL_H_

#include "core/scope.h"

namespace ipuflow::ops {

Output Mul(const Scope& scope, Output x, Output y);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_MATH_MUL_H_
