// Round: y = x rounded to the nearest integer, ties to even (0.5 -> 0, 1.5 ->
// 2, 2.5 -> 2: numpy's np.round, tf.round and torch.round), element-wise;
// float32/float16. Gradient 0 (PyTorch's; TensorFlow's is None).
//
//   Output y = ops::Round(scope, x);
#ifndef IPUFLOW_OPS_MATH_ROUND_H_
#define IPUFLOW_OPS_MATH_ROUND_H_

#include "core/scope.h"

namespace ipuflow::ops {

Output Round(const Scope& scope, Output x);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_MATH_ROUND_H_
