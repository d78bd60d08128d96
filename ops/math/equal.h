// Equal: z = (x == y) as bool, element-wise with numpy broadcasting; any
// dtype but resource (bool included). NaN == NaN is false (IEEE).
//
//   Output correct = ops::Equal(scope, predicted, labels);  // bool[N]
#ifndef IPUFLOW_OPS_MATH_EQUAL_H_
#define IPUFLOW_OPS_MATH_EQUAL_H_

#include "core/scope.h"

namespace ipuflow::ops {

Output Equal(const Scope& scope, Output x, Output y);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_MATH_EQUAL_H_
