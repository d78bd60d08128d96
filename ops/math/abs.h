// Abs: y = |x|, element-wise; float32/float16. abs(-0) = +0, NaN stays NaN
// (std::fabs). Gradient dy * sign(x): 0 at x = 0 (PyTorch's and
// TensorFlow's rule).
//
//   Output y = ops::Abs(scope, x);
#ifndef IPUFLOW_OPS_MATH_ABS_H_
#define IPUFLOW_OPS_MATH_ABS_H_

#include "core/scope.h"

namespace ipuflow::ops {

Output Abs(const Scope& scope, Output x);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_MATH_ABS_H_
