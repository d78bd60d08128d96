// ApplyRMSProp and ApplyAdagrad: the RMSprop and Adagrad updates in place,
// each as one op, as TensorFlow's ApplyRMSProp and ApplyAdagradV2 (what
// Keras' RMSprop and Adagrad run):
//
//   RMSprop:  ms  = rho * ms + (1 - rho) * grad^2
//             mom = momentum * mom + lr * grad / sqrt(ms + epsilon)
//             var -= mom
//   Adagrad:  accum += grad^2
//             var   -= lr * grad / (sqrt(accum + initial_accumulator_value)
//                                   + epsilon)
//
// Adagrad's slot holds the sum of squares without Keras' initial value
// (which the update adds), so it starts at zero like every slot. PyTorch
// puts RMSprop's epsilon outside the square root and starts Adagrad's sum
// at 0. `ms`, `mom`, `accum` are variables of var's dtype and shape;
// hyperparameters are float32 scalar tensors (rho in [0, 1], momentum,
// epsilon >= 0); computed in float32 for float16 variables, each written
// tensor rounded once (apply_util.h). `shard` as ApplyMomentum's.
//
//   Node* step = ops::ApplyRMSProp(scope, w.handle, ms, mom, lr, rho, mu,
//                                  eps, dw);
#ifndef IPUFLOW_OPS_STATE_APPLY_RMS_PROP_H_
#define IPUFLOW_OPS_STATE_APPLY_RMS_PROP_H_

#include "core/scope.h"

namespace ipuflow::ops {

Node* ApplyRMSProp(const Scope& scope, Output var, Output ms, Output mom,
                   Output lr, Output rho, Output momentum, Output epsilon,
                   Output grad, Output shard = Output());

Node* ApplyAdagrad(const Scope& scope, Output var, Output accum, Output lr,
                   Output epsilon, Output grad, float initial_accumulator_value,
                   Output shard = Output());

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_STATE_APPLY_RMS_PROP_H_
