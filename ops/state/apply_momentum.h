// ApplyMomentum: SGD with (optionally Nesterov) momentum, in place, as one op.
//
//   accum = momentum * accum + grad
//   var  -= lr * accum                              (use_nesterov = false)
//   var  -= lr * (grad + momentum * accum)          (use_nesterov = true)
//
// These are TensorFlow's ApplyMomentum and PyTorch's SGD (dampening 0).
//
//   Node* step = ops::ApplyMomentum(scope, w.handle, accum.handle, lr, dw,
//                                   ops::Const(scope, 0.9f),
//                                   /*use_nesterov=*/true);
//
// `accum` is a variable of the same dtype and shape as `var` (a slot that
// only this op should touch: only accesses to `var` are ordered by creation).
// `lr` and `momentum` are float32 scalar tensors. `shard` (optional, int32
// [2] {index, count}, ops/state/update_shard.h): only that chunk of var and
// accum is computed (one replica's part of a sharded weight update).
#ifndef IPUFLOW_OPS_STATE_APPLY_MOMENTUM_H_
#define IPUFLOW_OPS_STATE_APPLY_MOMENTUM_H_

#include "core/scope.h"

namespace ipuflow::ops {

Node* ApplyMomentum(const Scope& scope, Output var, Output accum, Output lr,
                    Output grad, Output momentum, bool use_nesterov = false,
                    Output shard = Output());

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_STATE_APPLY_MOMENTUM_H_
