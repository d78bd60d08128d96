// ReduceLogSumExp: log(sum(exp(x))) over `axes` (every axis when empty;
// `keep_dims` as ReduceSum), computed stably as m + log(sum(exp(x - m)))
// with m the row's maximum, so large values do not overflow. float32 and
// float16 (computed in float32, rounded once).
//
//   Output lse = ops::ReduceLogSumExp(scope, logits, {-1}, true);  // [N,1]
//
// tf.reduce_logsumexp / torch.logsumexp: -inf over zero elements or a row of
// -inf; +inf if the row holds +inf; NaN if it holds NaN. The gradient is
// dy * exp(x - y) (the softmax of the row).
#ifndef IPUFLOW_OPS_MATH_REDUCE_LOG_SUM_EXP_H_
#define IPUFLOW_OPS_MATH_REDUCE_LOG_SUM_EXP_H_

#include <cstdint>
#include <vector>

#include "core/scope.h"

namespace ipuflow::ops {

Output ReduceLogSumExp(const Scope& scope, Output x,
                       std::vector<int64_t> axes = {}, bool keep_dims = false);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_MATH_REDUCE_LOG_SUM_EXP_H_
