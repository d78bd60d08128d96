// ApplyLamb: one LAMB step (You et al. 2019, "Large Batch Optimization for
// Deep Learning", Algorithm 2), in place, as one op. With t = step:
//
//   m = beta1 * m + (1 - beta1) * grad;     m_hat = m / (1 - beta1^t)
//   v = beta2 * v + (1 - beta2) * grad^2;   v_hat = v / (1 - beta2^t)
//   r = m_hat / (sqrt(v_hat) + epsilon) + weight_decay * var
//   trust = ||var|| / ||r||   (1 if either norm is 0)
//   var -= lr * trust * r
//
// Norms are over the whole variable (the paper's layer-wise trust ratio), as
// in TensorFlow Addons' LAMB.
//
//   Node* step = ops::ApplyLamb(scope, w.handle, m.handle, v.handle, lr, dw,
//                               beta1, beta2, epsilon, t,
//                               /*weight_decay=*/0.01f);
//
// Inputs as ApplyAdam (ops/state/apply_adam.h).
#ifndef IPUFLOW_OPS_STATE_APPLY_LAMB_H_
#define IPUFLOW_OPS_STATE_APPLY_LAMB_H_

#include "core/scope.h"

namespace ipuflow::ops {

Node* ApplyLamb(const Scope& scope, Output var, Output m, Output v, Output lr,
                Output grad, Output beta1, Output beta2, Output epsilon,
                Output step, float weight_decay = 0);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_STATE_APPLY_LAMB_H_
