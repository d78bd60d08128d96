// Div: z = x / y, element-wise with numpy broadcasting.
//
//   Output p = ops::Div(scope, counts, total);   // [N,C] / [N,1] -> [N,C]
//
// Floats follow IEEE (x / 0 is +-inf or NaN, no error). Integers divide
// truncating toward zero like C (and TensorFlow's Div); an integer division
// by zero is an InvalidArgument error, and INT_MIN / -1 wraps to INT_MIN.
#ifndef IPUFLOW_OPS_MATH_DIV_H_
#define IPUFLOW_OPS_MATH_DIV_H_

#include "core/scope.h"

namespace ipuflow::ops {

Output Div(const Scope& scope, Output x, Output y);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_MATH_DIV_H_
