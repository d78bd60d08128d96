// Replica groups as node attributes, shared by the collective ops:
// "replica_group_size" (int, 0 = all replicas, TF's replica_group_size=None)
// and "replica_group_type" ("consecutive", TF's grouping, or "orthogonal";
// see ReplicaGroups in core/ipu/collective_group.h).
#ifndef IPUFLOW_OPS_COLLECTIVE_REPLICA_GROUPS_ATTR_H_
#define IPUFLOW_OPS_COLLECTIVE_REPLICA_GROUPS_ATTR_H_

#include <functional>

#include "core/attr_value.h"
#include "core/graph.h"
#include "core/ipu/collective_group.h"
#include "core/kernel.h"
#include "core/op_registry.h"

namespace ipuflow::ops {

// The attribute values for `groups`, merged into `attrs`.
AttrMap WithGroupAttrs(const ReplicaGroups& groups, AttrMap attrs = {});
// Checks the attributes (a negative size or an unknown type), naming the node.
absl::Status CheckGroupAttrs(const ShapeContext& c);
// InvalidArgument naming input 0 unless it is numeric (float16/32, int32/64):
// "... only numeric tensors can be <verb> across replicas".
absl::Status CheckNumericInput(const ShapeContext& c, const char* verb);
// The group size if known when building (size > 0), else kUnknownDim.
int64_t StaticGroupSize(const AttrMap& attrs);
ReplicaGroups GroupsOf(const AttrMap& attrs);
// A reduction or gather over all replicas (group size 0) gives every
// replica the same value; over groups, each group its own.
ReplicaIdentity AllReplicasIdentical(const Node& node);

// Runs `fn(group, replica, groups)` on the program's collective group, or,
// outside a replicated program, on a group of one replica. Errors are
// prefixed with the node.
absl::Status RunCollective(
    KernelContext& ctx,
    const std::function<absl::Status(CollectiveGroup&, int replica,
                                     const ReplicaGroups&)>& fn);
// The group size this kernel runs with (InvalidArgument naming the size
// and the replica count if it does not divide it).
absl::StatusOr<int> RuntimeGroupSize(const KernelContext& ctx);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_COLLECTIVE_REPLICA_GROUPS_ATTR_H_
