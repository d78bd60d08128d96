// SparseSoftmaxCrossEntropyWithLogits: per-example cross-entropy between
// softmax(logits) and integer class labels, fused and numerically stable
// (like TensorFlow's op of the same name). Returns the loss [N] and the
// gradient of the loss wrt the logits, softmax(logits) - onehot(labels),
// [N,C], which the op's own gradient reuses.
//
//   auto xent =
//       ops::SparseSoftmaxCrossEntropyWithLogits(scope, logits, labels);
//   Output loss = ops::ReduceMean(scope, xent.loss);  // a scalar to minimise
//   Output same = ops::SoftmaxCrossEntropyLoss(scope, logits, labels);
//
// logits: float32 or float16 [N, C] (float16 is computed in float32, the
// outputs rounded once; both outputs have the logits' dtype); labels: int32
// or int64 [N], each in [0, C) (a label outside is an InvalidArgument error
// at run time naming it, its row and C).
#ifndef IPUFLOW_OPS_NN_SPARSE_SOFTMAX_CROSS_ENTROPY_WITH_LOGITS_H_
#define IPUFLOW_OPS_NN_SPARSE_SOFTMAX_CROSS_ENTROPY_WITH_LOGITS_H_

#include "core/scope.h"

namespace ipuflow::ops {

struct SoftmaxCrossEntropy {
  Output loss;      // [N]: logsumexp(logits[n]) - logits[n, labels[n]].
  Output backprop;  // [N, C]: softmax(logits) - onehot(labels).
};

SoftmaxCrossEntropy SparseSoftmaxCrossEntropyWithLogits(const Scope& scope,
                                                        Output logits,
                                                        Output labels);

// backprop * dloss[:, None]: the gradient wrt the logits given the gradient
// of the loss (what SparseSoftmaxCrossEntropyWithLogits' gradient builds).
Output SparseSoftmaxCrossEntropyWithLogitsGrad(const Scope& scope,
                                               Output backprop, Output dloss);

// The mean over the batch of SparseSoftmaxCrossEntropyWithLogits' loss: a
// scalar of the logits' dtype.
Output SoftmaxCrossEntropyLoss(const Scope& scope, Output logits,
                               Output labels);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_NN_SPARSE_SOFTMAX_CROSS_ENTROPY_WITH_LOGITS_H_
