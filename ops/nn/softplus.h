// Softplus: y = log(1 + e^(beta x)) / beta, and x where beta x > threshold,
// element-wise; float32/float16 (torch.nn.Softplus: beta 1, threshold 20;
// tf.math.softplus is beta 1 without the threshold, which changes nothing
// in float32 beyond 20). SoftplusGrad(x, dy) = dy sigmoid(beta x), dy
// beyond the threshold.
//
//   Output y = ops::Softplus(scope, x);
#ifndef IPUFLOW_OPS_NN_SOFTPLUS_H_
#define IPUFLOW_OPS_NN_SOFTPLUS_H_

#include "core/scope.h"

namespace ipuflow::ops {

Output Softplus(const Scope& scope, Output x, float beta = 1.0f,
                float threshold = 20.0f);
// dx for Softplus(x) given dy (what its gradient builds).
Output SoftplusGrad(const Scope& scope, Output x, Output dy, float beta = 1.0f,
                    float threshold = 20.0f);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_NN_SOFTPLUS_H_
