// Neg: y = -x, element-wise; float32/float16/int32/int64 (integers wrap:
// -INT_MIN is INT_MIN).
//
//   Output minus_x = ops::Neg(scope, x);
#ifndef IPUFLOW_OPS_MATH_NEG_H_
#define IPUFLOW_OPS_MATH_NEG_H_

#include "core/scope.h"

namespace ipuflow::ops {

Output Neg(const Scope& scope, Output x);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_MATH_NEG_H_
