// LeakyRelu: y = x for x > 0, alpha * x otherwise, element-wise;
// float32/float16 (tf.nn.leaky_relu, alpha 0.2 by default as TensorFlow's;
// PyTorch's negative_slope default is 0.01). NaN stays NaN. LeakyReluGrad(x,
// dy) = dy for x > 0, alpha * dy otherwise (TensorFlow's rule at 0).
//
//   Output y = ops::LeakyRelu(scope, x);
#ifndef IPUFLOW_OPS_NN_LEAKY_RELU_H_
#define IPUFLOW_OPS_NN_LEAKY_RELU_H_

#include "core/scope.h"

namespace ipuflow::ops {

Output LeakyRelu(const Scope& scope, Output x, float alpha = 0.2f);
// dx for LeakyRelu(x) given dy (what its gradient builds).
Output LeakyReluGrad(const Scope& scope, Output x, Output dy,
                     float alpha = 0.2f);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_NN_LEAKY_RELU_H_
