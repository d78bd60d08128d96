// HardSigmoid: y = 0 for x <= -3, 1 for x >= 3, x / 6 + 1/2 between,
// element-wise; float32/float16 (torch.nn.Hardsigmoid, = relu6(x + 3) / 6;
// Keras before 2.11 used 0.2 x + 0.5). NaN stays NaN. HardSigmoidGrad(x,
// dy) = dy / 6 for -3 < x < 3, 0 elsewhere (PyTorch's).
//
//   Output y = ops::HardSigmoid(scope, x);
#ifndef IPUFLOW_OPS_NN_HARD_SIGMOID_H_
#define IPUFLOW_OPS_NN_HARD_SIGMOID_H_

#include "core/scope.h"

namespace ipuflow::ops {

Output HardSigmoid(const Scope& scope, Output x);
// dx for HardSigmoid(x) given dy (what its gradient builds).
Output HardSigmoidGrad(const Scope& scope, Output x, Output dy);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_NN_HARD_SIGMOID_H_
