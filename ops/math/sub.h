// Sub: z = x - y, element-wise with numpy broadcasting.
//
//   Output centred = ops::Sub(scope, x, mean);  // [N,C] - [C] -> [N,C]
//   Output d = ops::Sub(scope, a, ops::Const(scope, 1.0f));
#ifndef IPUFLOW_OPS_MATH_SUB_H_
#define IPUFLOW_OPS_MATH_SUB_H_

#include "core/scope.h"

namespace ipuflow::ops {

Output Sub(const Scope& scope, Output x, Output y);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_MATH_SUB_H_
