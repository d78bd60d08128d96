// Add: z = x + y, element-wise with numpy broadcasting.
//
//   Output z = ops::Add(scope, activations, bias);  // [N,C] + [C] -> [N,C]
#ifndef IPUFLOW_OPS_MATH_ADD_H_
#define IPUFLOW_OPS_MATH_ADD_H_

#include "core/scope.h"

namespace ipuflow::ops {

Output Add(const Scope& scope, Output x, Output y);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_MATH_ADD_H_
