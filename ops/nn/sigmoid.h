// Sigmoid: y = 1 / (1 + exp(-x)), element-wise; SigmoidGrad: its gradient
// expressed through the output, dx = dy * y * (1 - y). float32 and float16.
//
//   Output gate = ops::Sigmoid(scope, ops::MatMul(scope, h, w_gate));
//   Output dx = ops::SigmoidGrad(scope, gate, dgate);  // Sigmoid's gradient
#ifndef IPUFLOW_OPS_NN_SIGMOID_H_
#define IPUFLOW_OPS_NN_SIGMOID_H_

#include "core/scope.h"

namespace ipuflow::ops {

Output Sigmoid(const Scope& scope, Output x);
// dy * y * (1 - y), where y = Sigmoid(x).
Output SigmoidGrad(const Scope& scope, Output y, Output dy);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_NN_SIGMOID_H_
