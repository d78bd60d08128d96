#include "core/compiler/replica_identical.h"

#include "core/op_registry.h"

namespace ipuflow::compiler {
namespace {

// One pass in id (= topological) order over nodes [0, end), given which
// variables (by node id) are still believed identical.
void Propagate(const Graph& graph, int end, const std::vector<bool>& variables,
               std::vector<bool>* identical) {
  for (int id = 0; id < end; ++id) {
    const Node& n = *graph.node(id);
    const OpDef& op = n.op_def();
    bool same = false;
    if (!op.needs_feed() && !op.sub_programs()) {
      switch (op.replica_identity(n)) {
        case ReplicaIdentity::kIdentical:
          same = true;
          break;
        case ReplicaIdentity::kDiffers:
          break;
        case ReplicaIdentity::kFollowsInputs:
          same = variables[id];
          for (const Output& in : n.inputs())
            same = same && (*identical)[in.node->id()];
          break;
      }
    }
    (*identical)[id] = same;
  }
}

std::vector<bool> Analyse(const Graph& graph, int end) {
  // Optimistic start: every variable identical; a variable written with a
  // value that is not identical stops being so, until nothing changes.
  std::vector<bool> variables(end, true);
  std::vector<bool> identical(end, false);
  for (bool changed = true; changed;) {
    Propagate(graph, end, variables, &identical);
    changed = false;
    for (int id = 0; id < end; ++id) {
      const Node& n = *graph.node(id);
      if (n.op_def().resource_access() != ResourceAccess::kWrite ||
          n.num_inputs() == 0) {
        continue;
      }
      bool written_same = true;
      for (int i = 1; i < n.num_inputs(); ++i) {
        written_same = written_same && identical[n.input(i).node->id()];
      }
      const int var = n.input(0).node->id();
      if (!written_same && variables[var]) {
        variables[var] = false;
        changed = true;
      }
    }
  }
  return identical;
}

}  // namespace

std::vector<bool> ReplicaIdenticalNodes(const Graph& graph) {
  return Analyse(graph, graph.num_nodes());
}

std::vector<bool> FindReplicaIdentical(const NodeOrder& order) {
  std::vector<bool> out(order.size(), false);
  if (order.size() == 0) return out;
  const Graph& graph = *order.nodes[0]->graph();
  const std::vector<bool> identical = Analyse(graph, graph.num_nodes());
  for (int pos = 0; pos < order.size(); ++pos) {
    out[pos] = identical[order.nodes[pos]->id()];
  }
  return out;
}

}  // namespace ipuflow::compiler
