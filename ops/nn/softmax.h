// Softmax: y = exp(x) / sum(exp(x)) over the last axis, computed stably (the
// row's max is subtracted first); SoftmaxGrad: its gradient through the
// output, dx = (dy - sum(dy * y)) * y per row. float32 and float16 (rows are
// computed in float32).
//
//   Output probs = ops::Softmax(scope, logits);        // [N,C], rows sum to 1
//   Output dx = ops::SoftmaxGrad(scope, probs, dprobs);  // Softmax's gradient
#ifndef IPUFLOW_OPS_NN_SOFTMAX_H_
#define IPUFLOW_OPS_NN_SOFTMAX_H_

#include "core/scope.h"

namespace ipuflow::ops {

Output Softmax(const Scope& scope, Output logits);
// (dy - sum(dy * y, last axis)) * y, where y = Softmax(x).
Output SoftmaxGrad(const Scope& scope, Output y, Output dy);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_NN_SOFTMAX_H_
