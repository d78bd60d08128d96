// CrossReplicaSum and CrossReplicaMean: reduce a tensor over the replicas of
// a device program (a real all-reduce between the replica threads, see
// core/ipu/collective_group.h), over all replicas or within replica groups
// (TensorFlow IPU guide, "Popops cross replica operators":
// cross_replica_sum(x, replica_group_size) reduces within consecutive
// groups of that size). Outside a replicated program they act as on one
// replica (their input; a group size other than 1 is an error).
//
//   Output g = ops::CrossReplicaMean(scope, local_gradient);
//   // 8 replicas, sums over {0,1} {2,3} {4,5} {6,7}:
//   Output s = ops::CrossReplicaSum(scope, x, ReplicaGroups::Consecutive(2));
//   // Sums over {0,4} {1,5} {2,6} {3,7}:
//   Output o = ops::CrossReplicaSum(scope, x, ReplicaGroups::Orthogonal(2));
#ifndef IPUFLOW_OPS_COLLECTIVE_CROSS_REPLICA_H_
#define IPUFLOW_OPS_COLLECTIVE_CROSS_REPLICA_H_

#include "core/ipu/collective_group.h"
#include "core/scope.h"

namespace ipuflow::ops {

Output CrossReplicaSum(const Scope& scope, Output x,
                       const ReplicaGroups& groups = ReplicaGroups::All());
Output CrossReplicaMean(const Scope& scope, Output x,
                        const ReplicaGroups& groups = ReplicaGroups::All());

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_COLLECTIVE_CROSS_REPLICA_H_
