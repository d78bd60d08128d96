// SmoothedSparseSoftmaxCrossEntropy: the softmax cross-entropy of integer
// labels with label smoothing, as PyTorch 1.13's
// CrossEntropyLoss(label_smoothing=e, reduction="none") and Keras'
// CategoricalCrossentropy(label_smoothing=e): the target distribution is
// q = (1 - e) onehot(label) + e / C, and
//   loss_i = logsumexp(x_i) - sum_c q_c x_ic          [N]
//   dloss_i/dx_i = softmax(x_i) - q.
// logits [N, C] float32 or float16 (computed in float32, row max
// subtracted), labels [N] int32 / int64 in [0, C), label_smoothing in
// [0, 1]; 0 gives SparseSoftmaxCrossEntropyWithLogits' loss.
//
//   Output loss = ops::ReduceMean(scope,
//       ops::SmoothedSparseSoftmaxCrossEntropy(scope, logits, labels, 0.1f));
#ifndef IPUFLOW_OPS_LOSS_SMOOTHED_CROSS_ENTROPY_H_
#define IPUFLOW_OPS_LOSS_SMOOTHED_CROSS_ENTROPY_H_

#include "core/scope.h"

namespace ipuflow::ops {

Output SmoothedSparseSoftmaxCrossEntropy(const Scope& scope, Output logits,
                                         Output labels, float label_smoothing);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_LOSS_SMOOTHED_CROSS_ENTROPY_H_
