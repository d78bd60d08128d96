// ApplyAdam: one Adam or AdamW step, in place, as one op. With t = step:
//
//   m    = beta1 * m + (1 - beta1) * grad
//   v    = beta2 * v + (1 - beta2) * grad^2
//   var -= lr * weight_decay * var                       (AdamW; 0 = Adam)
//        + lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + epsilon)
//
// This is Algorithm 1 of Kingma & Ba (epsilon added to sqrt(v_hat)), i.e.
// torch.optim.Adam; with weight_decay > 0 it is torch.optim.AdamW
// (Loshchilov & Hutter's decoupled decay, scaled by lr as PyTorch does). The
// decay uses the value of var before this step, so "decay, then Adam step"
// (PyTorch's order) and "both from the old value" are the same update.
// TensorFlow's Adam adds epsilon to sqrt(v) before the bias correction
// instead (its "epsilon hat"); the two differ only while v is near epsilon^2.
//
//   Node* step = ops::ApplyAdam(scope, w.handle, m.handle, v.handle, lr, dw,
//                               beta1, beta2, epsilon, t,
//                               /*weight_decay=*/0.01f);
//
// m and v are variables of var's dtype and shape (slots only this op should
// touch). lr, beta1, beta2, epsilon and step are float32 scalar tensors;
// step counts from 1 (the bias corrections divide by 1 - beta^step).
// `shard` (optional, int32 [2] {index, count}, ops/state/update_shard.h):
// only that chunk of var, m and v is computed, the rest left as it is (one
// replica's part of a sharded weight update; grad is read there only).
#ifndef IPUFLOW_OPS_STATE_APPLY_ADAM_H_
#define IPUFLOW_OPS_STATE_APPLY_ADAM_H_

#include "core/scope.h"

namespace ipuflow::ops {

Node* ApplyAdam(const Scope& scope, Output var, Output m, Output v, Output lr,
                Output grad, Output beta1, Output beta2, Output epsilon,
                Output step, float weight_decay = 0, Output shard = Output());

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_STATE_APPLY_ADAM_H_
