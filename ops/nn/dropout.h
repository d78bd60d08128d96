// Dropout (training mode): each element of x is kept with probability
// 1 - rate and scaled by 1 / (1 - rate), or zeroed, so the expected value of
// y is x. A new mask is drawn on every run of the program, as a function of
// the `seed` attribute, the number of times this node has run in its program
// and the replica index: two graphs built with the same seed draw the same
// sequence of masks. The op also outputs the mask (0 or 1 / (1 - rate), x's
// shape and dtype), which its gradient reuses: dx = dy * mask (DropoutGrad).
//
//   auto drop = ops::Dropout(scope, hidden, /*rate=*/0.1f, /*seed=*/42);
//   Output logits = ops::MatMul(scope, drop.output, w);
//
// rate must be in [0, 1). float32 and float16.
#ifndef IPUFLOW_OPS_NN_DROPOUT_H_
#define IPUFLOW_OPS_NN_DROPOUT_H_

#include <cstdint>

#include "core/scope.h"

namespace ipuflow::ops {

struct DropoutOutputs {
  Output output;  // x * mask.
  Output mask;    // 0 (dropped) or 1 / (1 - rate) (kept).
};

DropoutOutputs Dropout(const Scope& scope, Output x, float rate,
                       int64_t seed = 0);

// dy * mask: Dropout's gradient given its mask.
Output DropoutGrad(const Scope& scope, Output dy, Output mask);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_NN_DROPOUT_H_
