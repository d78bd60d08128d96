// Silu: SiLU / Swish: y = x sigmoid(x) = x / (1 + e^-x), element-wise;
// computed in float64 and rounded once (x < -88.7 stays a subnormal, not
// 0); float32/float16 (torch.nn.SiLU, tf.nn.silu; Swish with beta = 1).
// SiluGrad(x, dy) = dy s (1 + x (1 - s)), s = sigmoid(x).
//
//   Output y = ops::Silu(scope, x);
#ifndef IPUFLOW_OPS_NN_SILU_H_
#define IPUFLOW_OPS_NN_SILU_H_

#include "core/scope.h"

namespace ipuflow::ops {

Output Silu(const Scope& scope, Output x);
// dx for Silu(x) given dy (what its gradient builds).
Output SiluGrad(const Scope& scope, Output x, Output dy);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_NN_SILU_H_
