// Compiler phase 2, node order: the order the needed nodes run in when run
// one at a time. Node ids are creation order, hence a topological order of
// data and control edges. The node order keeps those edges and each
// variable's accesses in creation order (the edges dependencies.h adds) and
// otherwise stays on one shard (IPU) while it can, lowest id first: a
// sharded program run one node at a time hops to another IPU's thread at
// each change of shard, and an optimizer's update built variable by
// variable interleaves them (the tutorial pipeline's weight update: 24
// runs of nodes on alternating IPUs in id order, 8 in this one; the
// main example's gap between pipeline runs went from ~0.9 to ~0.4 ms).
// With one shard the node order is id order. Every ordering edge the compiler
// adds later (dependencies.h, ordering.h) goes from a lower position to a
// higher one, so this order stays valid.
//
// Input: the pruned nodes (prune.h).
// Output: the nodes in node order and each node's position. Errors: a
// needed node whose op needs a feed (OpDef::needs_feed) is not fed, an op
// has no kernel, or a node is placed on an IPU outside [0, kMaxShards)
// (InvalidArgument naming it: later phases size per-shard tables by it).
#ifndef IPUFLOW_CORE_COMPILER_NODE_ORDER_H_
#define IPUFLOW_CORE_COMPILER_NODE_ORDER_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/graph.h"
#include "core/program_spec.h"

namespace ipuflow::compiler {

// The most IPUs (shards) a program may use: the largest IPU system
// IPUConfig accepts (core/ipu/ipu_system.h, kMaxIpus).
inline constexpr int kMaxShards = 1024;

struct NodeOrder {
  std::vector<const Node*> nodes;  // By position.
  std::vector<int> position;       // By node id; -1 if pruned.
  int size() const { return static_cast<int>(nodes.size()); }
};

absl::StatusOr<NodeOrder> OrderNodes(const Graph& graph,
                                     const ProgramSpec& spec,
                                     const std::vector<bool>& needed);

// The variable a resource op (OpDef::resource_access) touches, for ordering
// its accesses: the shared_name of its input 0's variable when set, else
// that node's name.
std::string ResourceKey(const Node& n);

// Calls edge(from, to) (indices into `nodes`, taken as the order built)
// for the order of each variable's accesses, TF2's automatic control
// dependencies: an access after the last write before it, a write after
// every read since that write.
void VariableOrderEdges(const std::vector<const Node*>& nodes,
                        const std::function<void(int, int)>& edge);

// The shard a node's memory is planned on: its IPU, 0 if unplaced.
inline int ShardOf(const Node* n) { return n->ipu() < 0 ? 0 : n->ipu(); }

}  // namespace ipuflow::compiler

#endif  // IPUFLOW_CORE_COMPILER_NODE_ORDER_H_
