// Ceil: y = ceil(x), element-wise; float32/float16. +-0, +-inf and NaN stay.
// Gradient 0 (PyTorch's; TensorFlow's is None).
//
//   Output y = ops::Ceil(scope, x);
#ifndef IPUFLOW_OPS_MATH_CEIL_H_
#define IPUFLOW_OPS_MATH_CEIL_H_

#include "core/scope.h"

namespace ipuflow::ops {

Output Ceil(const Scope& scope, Output x);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_MATH_CEIL_H_
