// Sign: y = sign(x) = -1, 0 or 1, element-wise; float32/float16. sign(+-0)
// = +-0 and NaN stays NaN (numpy's np.sign). Gradient 0 (TensorFlow's and
// PyTorch's).
//
//   Output y = ops::Sign(scope, x);
#ifndef IPUFLOW_OPS_MATH_SIGN_H_
#define IPUFLOW_OPS_MATH_SIGN_H_

#include "core/scope.h"

namespace ipuflow::ops {

Output Sign(const Scope& scope, Output x);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_MATH_SIGN_H_
