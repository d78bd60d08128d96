// RecomputationCheckpoint: the identity, marking a value that recomputation
// stores instead of recomputing, as Graphcore's
// pipelining_ops.recomputation_checkpoint (TensorFlow IPU) and PopTorch's
// recomputationCheckpoint: in a pipeline with recomputation on
// (IPUConfig.allow_recompute), a stage's backward pass recomputes its
// forward from the stage's arguments, except the values of stateful ops
// and of checkpoints, which the stash keeps; so a checkpoint caps how much
// is recomputed. Graphcore honours checkpoints only in
// RecomputeAndBackpropagateInterleaved mode; ipuflow runs both
// recomputation modes the same way (pipelining/pipeline.h), so it honours
// them in both. Outside a pipeline with recomputation it is Identity.
//
//   Output h = ops::RecomputationCheckpoint(scope, ops::Relu(scope, x));
#ifndef IPUFLOW_OPS_ARRAY_RECOMPUTATION_CHECKPOINT_H_
#define IPUFLOW_OPS_ARRAY_RECOMPUTATION_CHECKPOINT_H_

#include "core/scope.h"

namespace ipuflow::ops {

Output RecomputationCheckpoint(const Scope& scope, Output x);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_ARRAY_RECOMPUTATION_CHECKPOINT_H_
