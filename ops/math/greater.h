// Greater: z = (x > y) as bool, element-wise with numpy broadcasting;
// numeric dtypes. Any comparison with NaN is false (IEEE).
//
//   Output positive = ops::Greater(scope, x, ops::Const(scope, 0.0f));
#ifndef IPUFLOW_OPS_MATH_GREATER_H_
#define IPUFLOW_OPS_MATH_GREATER_H_

#include "core/scope.h"

namespace ipuflow::ops {

Output Greater(const Scope& scope, Output x, Output y);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_MATH_GREATER_H_
