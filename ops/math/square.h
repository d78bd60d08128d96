// Square: y = x * x, element-wise; float32/float16/int32/int64.
//
//   Output sq_err = ops::Square(scope, ops::Sub(scope, prediction, target));
#ifndef IPUFLOW_OPS_MATH_SQUARE_H_
#define IPUFLOW_OPS_MATH_SQUARE_H_

#include "core/scope.h"

namespace ipuflow::ops {

Output Square(const Scope& scope, Output x);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_MATH_SQUARE_H_
