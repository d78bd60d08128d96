// Elu: y = x for x > 0, alpha * (e^x - 1) otherwise, element-wise;
// float32/float16 (torch.nn.ELU; tf.nn.elu is alpha = 1, the default).
// e^x - 1 by expm1, accurate near 0. EluGrad(x, dy) = dy for x > 0,
// dy * alpha * e^x otherwise.
//
//   Output y = ops::Elu(scope, x);
#ifndef IPUFLOW_OPS_NN_ELU_H_
#define IPUFLOW_OPS_NN_ELU_H_

#include "core/scope.h"

namespace ipuflow::ops {

Output Elu(const Scope& scope, Output x, float alpha = 1.0f);
// dx for Elu(x) given dy (what its gradient builds).
Output EluGrad(const Scope& scope, Output x, Output dy, float alpha = 1.0f);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_NN_ELU_H_
