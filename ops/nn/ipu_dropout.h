// IpuDropout: dropout whose mask is never stored, as Graphcore's
// rand_ops.dropout (TensorFlow IPU; its gradient calls
// ipu_dropout_with_seed_and_reference): each element of x is kept with
// probability 1 - rate and scaled by 1 / (1 - rate), or zeroed. The mask is
// a function of a 64-bit key drawn per run from the `seed` attribute, the
// number of times the node has run in its program and the replica (as
// Dropout, dropout_mask.h), so each replica draws its own mask and two
// graphs built with one seed draw the same sequence. The op outputs y and
// the key (an int64 scalar); IpuDropoutWithSeed applies the mask of a
// given key, and is the gradient: dx = IpuDropoutWithSeed(dy, key), which
// regenerates the mask instead of keeping a tensor of x's size alive
// between the passes. rate in [0, 1). float32 and float16.
//
//   auto drop = ops::IpuDropout(scope, hidden, /*rate=*/0.1f, /*seed=*/7);
//   Output h = drop.output;
#ifndef IPUFLOW_OPS_NN_IPU_DROPOUT_H_
#define IPUFLOW_OPS_NN_IPU_DROPOUT_H_

#include <cstdint>

#include "core/scope.h"

namespace ipuflow::ops {

struct IpuDropoutOutputs {
  Output output;  // x * mask.
  Output seed;    // int64 scalar: the key this run's mask comes from.
};

IpuDropoutOutputs IpuDropout(const Scope& scope, Output x, float rate,
                             int64_t seed = 0);

// x * the mask of `seed` (an IpuDropout's key) at `rate`.
Output IpuDropoutWithSeed(const Scope& scope, Output x, Output seed,
                          float rate);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_NN_IPU_DROPOUT_H_
