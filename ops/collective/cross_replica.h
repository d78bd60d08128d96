// CrossReplicaSum and CrossReplicaMean: reduce a tensor over the replicas of
// a device program (a real all-reduce between the replica threads, see
// core/ipu/collective_group.h). Outside a replicated program they return
// their input.
//
//   Output g = ops::CrossReplicaMean(scope, local_gradient);
#ifndef IPUFLOW_OPS_COLLECTIVE_CROSS_REPLICA_H_
#define IPUFLOW_OPS_COLLECTIVE_CROSS_REPLICA_H_

#include "core/scope.h"

namespace ipuflow::ops {

Output CrossReplicaSum(const Scope& scope, Output x);
Output CrossReplicaMean(const Scope& scope, Output x);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_COLLECTIVE_CROSS_REPLICA_H_
