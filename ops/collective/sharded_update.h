// The collectives of a sharded weight update (replicated optimizer-state
// sharding, ZeRO-1; TensorFlow IPU guide 6.9; the original's elementwise
// clustering of the resource update turns the gradient all-reduce into a
// reduce-scatter and gathers the updated weight, wave2_reference.md 1.3):
//
//   Output g = ops::ShardedCrossReplicaMean(scope, grad, shard);
//   ops::ApplyAdam(scope, w, m, v, lr, g, b1, b2, eps, t, 0.f, shard);
//   ops::GatherVariableShards(scope.WithControlDependencies({apply}), w,
//                             shard);
//
// `shard` is an int32 [2] {index, count} known when the program runs
// (ops/state/update_shard.h: replica r owns chunk r, c = ceil(n/R) elements,
// of the flattened variable): {r, R} for a sharded update, {0, 1} for a
// whole one. With {0, 1} the two ops are a plain all-reduce and nothing,
// so one graph serves both (the program decides which tensors are sharded
// when it compiles, core/ipu/remote_state.h).
//
// ShardedCrossReplicaSum / Mean(x, shard): x's shape. Sharded: a
// reduce-scatter over all replicas; this replica's chunk holds the sum
// (mean) over the replicas, the other elements are zero (tensors keep their
// whole shape on the emulated IPU; the work and the bytes sent are the
// chunk's). Both collectives add the replicas' inputs in rank order
// (core/ipu/collective_group.h), so the chunk is bitwise what the
// all-reduce gives there. Not differentiable.
//
// GatherVariableShards(var, shard): sharded: every replica's chunk of the
// variable, all-gathered in place, so each replica again holds the whole
// updated variable. Whole: nothing.
//
// The shard count must be the number of replicas (sharding over groups of
// replicas is not modelled); InvalidArgument naming both otherwise.
#ifndef IPUFLOW_OPS_COLLECTIVE_SHARDED_UPDATE_H_
#define IPUFLOW_OPS_COLLECTIVE_SHARDED_UPDATE_H_

#include "core/scope.h"

namespace ipuflow::ops {

Output ShardedCrossReplicaSum(const Scope& scope, Output x, Output shard);
Output ShardedCrossReplicaMean(const Scope& scope, Output x, Output shard);
Node* GatherVariableShards(const Scope& scope, Output var, Output shard);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_COLLECTIVE_SHARDED_UPDATE_H_
