// Compiler phase 13, replica identity: which nodes' outputs are identical on
// every replica, for stochastic rounding in REPLICA_IDENTICAL_ONLY mode
// (IPUConfig.floating_point_behaviour.esr; core/half_rounding.h). Such
// values round stochastically with a key that leaves out the replica, so
// they stay identical; the others round to nearest.
//
// The rule, from the op registry (OpDef::replica_identity): an op's outputs
// are identical when all its data inputs are (kFollowsInputs, the default:
// constants and variables, without inputs, are sources of identical
// values), always (kIdentical: an all-reduce over all replicas), or never
// (kDiffers: an infeed dequeue, the replica index). Ops that need a feed
// (placeholders, loop arguments: Execute may give each replica its own) and
// ops that run sub-programs (a loop's body may dequeue) differ. A variable
// stays identical only if every op that writes it (ResourceAccess::kWrite
// on input 0) writes identical values: found as the greatest fixpoint, so
// `w <- w - lr * allreduce(g)` keeps w identical.
//
// Whatever this analysis says, values identical on every replica stay
// identical: both nearest rounding and the replica-free stochastic key are
// functions of the value alone. A value wrongly called identical only gets
// the same random bits on every replica. A fed output of a node that is not
// a placeholder counts as its node would compute it.
//
// Input: the node order (the analysis covers every node of its graph, so fed
// values and variables written by other programs count).
// Output: per position, true if the node's outputs are replica-identical.
#ifndef IPUFLOW_CORE_COMPILER_REPLICA_IDENTICAL_H_
#define IPUFLOW_CORE_COMPILER_REPLICA_IDENTICAL_H_

#include <vector>

#include "core/compiler/node_order.h"

namespace ipuflow::compiler {

std::vector<bool> FindReplicaIdentical(const NodeOrder& order);

// The same analysis over every node of `graph`, by node id.
std::vector<bool> ReplicaIdenticalNodes(const Graph& graph);

}  // namespace ipuflow::compiler

#endif  // IPUFLOW_CORE_COMPILER_REPLICA_IDENTICAL_H_
