// LogSoftmax: y = x - log(sum(exp(x))) over the last axis, computed stably
// (the row's max is subtracted first); LogSoftmaxGrad: its gradient through
// the output, dx = dy - exp(y) * sum(dy) per row. float32 and float16 (rows
// are computed in float32).
//
//   Output logp = ops::LogSoftmax(scope, logits);   // [N,C]
//   Output picked = ops::ReduceSum(scope, ops::Mul(scope, logp, onehot), {1});
//   Output nll = ops::Neg(scope, picked);            // [N]
#ifndef IPUFLOW_OPS_NN_LOG_SOFTMAX_H_
#define IPUFLOW_OPS_NN_LOG_SOFTMAX_H_

#include "core/scope.h"

namespace ipuflow::ops {

Output LogSoftmax(const Scope& scope, Output logits);
// dy - exp(y) * sum(dy, last axis), where y = LogSoftmax(x).
Output LogSoftmaxGrad(const Scope& scope, Output y, Output dy);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_NN_LOG_SOFTMAX_H_
