// AllGather: every replica of a group gets every member's x, stacked in
// rank order along a new leading dimension: [G, ...x.shape] (TensorFlow IPU
// guide, "Popops all to all and all gather operators": all_gather(x,
// replication_factor)). Members must have the same x shape.
//
//   // 4 replicas, Orthogonal(2) groups {0,2} {1,3}: replica 0 and 2 get
//   // [x_0; x_2], replica 1 and 3 get [x_1; x_3].
//   Output all = ops::AllGather(scope, x, ReplicaGroups::Orthogonal(2));
//   // The inverse of ReduceScatter's sharding (slice off the padding):
//   Output full = ops::Reshape(scope, ops::AllGather(scope, shard), {-1});
//
// With G = 0 (all replicas) the leading dimension is known only when the
// program runs ([?, ...] when building).
#ifndef IPUFLOW_OPS_COLLECTIVE_ALL_GATHER_H_
#define IPUFLOW_OPS_COLLECTIVE_ALL_GATHER_H_

#include "core/ipu/collective_group.h"
#include "core/scope.h"

namespace ipuflow::ops {

Output AllGather(const Scope& scope, Output x,
                 const ReplicaGroups& groups = ReplicaGroups::All());

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_COLLECTIVE_ALL_GATHER_H_
