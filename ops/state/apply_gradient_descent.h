// ApplyGradientDescent: var -= lr * grad, in place, as one op.
//
//   Node* step = ops::ApplyGradientDescent(scope, w.handle,
//                                          ops::Const(scope, 0.1f), dw);
//
// `lr` is a float32 scalar tensor (so a schedule can feed it); `grad` has
// the variable's dtype and shape. optimizers/gradient_descent.h builds these.
// `shard` (optional, int32 [2] {index, count}, ops/state/update_shard.h):
// only that chunk of var is computed.
#ifndef IPUFLOW_OPS_STATE_APPLY_GRADIENT_DESCENT_H_
#define IPUFLOW_OPS_STATE_APPLY_GRADIENT_DESCENT_H_

#include "core/scope.h"

namespace ipuflow::ops {

Node* ApplyGradientDescent(const Scope& scope, Output var, Output lr,
                           Output grad, Output shard = Output());

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_STATE_APPLY_GRADIENT_DESCENT_H_
