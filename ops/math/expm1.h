// Expm1: y = e^x - 1, element-wise; float32/float16, the C library's expm1f
// (accurate for small x, where Exp(x) - 1 loses digits). expm1(-inf) = -1.
//
//   Output y = ops::Expm1(scope, x);
#ifndef IPUFLOW_OPS_MATH_EXPM1_H_
#define IPUFLOW_OPS_MATH_EXPM1_H_

#include "core/scope.h"

namespace ipuflow::ops {

Output Expm1(const Scope& scope, Output x);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_MATH_EXPM1_H_
