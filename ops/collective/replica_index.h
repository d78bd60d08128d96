// ReplicaIndex: the index of the replica running the program (an int32
// scalar; 0 outside a replicated program). Lets replicas differ, e.g. to
// read their own shard of a dataset.
//
//   Output r = ops::ReplicaIndex(scope);
#ifndef IPUFLOW_OPS_COLLECTIVE_REPLICA_INDEX_H_
#define IPUFLOW_OPS_COLLECTIVE_REPLICA_INDEX_H_

#include "core/scope.h"

namespace ipuflow::ops {

Output ReplicaIndex(const Scope& scope);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_COLLECTIVE_REPLICA_INDEX_H_
