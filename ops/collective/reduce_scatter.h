// ReduceScatter: reduces a tensor over the replicas of a group and leaves
// each replica one chunk of the result (TensorFlow IPU guide, "Popops reduce
// scatter operator": reduce_scatter(x, replication_factor, op)). `x` is read
// flat (n elements) and zero-padded to a multiple of the group size G; the
// replica with rank i in its group gets elements [i c, (i+1) c) of the
// reduction, c = ceil(n/G), as a [c] tensor. `op`: kSum, kMean, or kLocal
// (each replica keeps chunk i of its own x, nothing exchanged; no gradient).
//
//   // 4 replicas, x = [1 2 3 4 5] * (r+1): replica 0 gets [10 20],
//   // 1 gets [30 40], 2 gets [50 0], 3 gets [0 0].
//   Output shard = ops::ReduceScatter(scope, x);
//   Output half =
//       ops::ReduceScatter(scope, x, CollectiveGroup::ReduceOp::kMean,
//                          ReplicaGroups::Consecutive(2));
//
// With G = 0 (all replicas) the output length is known only when the
// program runs ([?] when building). The gradient needs x's element count.
#ifndef IPUFLOW_OPS_COLLECTIVE_REDUCE_SCATTER_H_
#define IPUFLOW_OPS_COLLECTIVE_REDUCE_SCATTER_H_

#include "core/ipu/collective_group.h"
#include "core/scope.h"

namespace ipuflow::ops {

Output ReduceScatter(
    const Scope& scope, Output x,
    CollectiveGroup::ReduceOp op = CollectiveGroup::ReduceOp::kSum,
    const ReplicaGroups& groups = ReplicaGroups::All());

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_COLLECTIVE_REDUCE_SCATTER_H_
