// ApplySGD: PyTorch's torch.optim.SGD step in place, as one op, with weight
// decay and dampening (ApplyMomentum is TensorFlow's rule, without them):
//
//   d   = grad + weight_decay * var
//   buf = d                                        on the first step
//   buf = momentum * buf + (1 - dampening) * d     after it
//   var -= lr * (d + momentum * buf)               (nesterov)
//   var -= lr * buf                                (momentum > 0)
//   var -= lr * d                                  (momentum 0; buf unused)
//
// `buf` is a variable of var's dtype and shape; lr, momentum, dampening,
// weight_decay (>= 0; dampening in [0, 1]) and step (the 1-based step
// count, as Adam's) are float32 scalar tensors. Nesterov needs momentum > 0
// and dampening 0 (PyTorch's rule). float16 variables are computed in
// float32, each written tensor rounded once. `shard` as ApplyMomentum's.
#ifndef IPUFLOW_OPS_STATE_APPLY_SGD_H_
#define IPUFLOW_OPS_STATE_APPLY_SGD_H_

#include "core/scope.h"

namespace ipuflow::ops {

Node* ApplySGD(const Scope& scope, Output var, Output buf, Output lr,
               Output momentum, Output dampening, Output weight_decay,
               Output step, Output grad, bool nesterov,
               Output shard = Output());

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_STATE_APPLY_SGD_H_
