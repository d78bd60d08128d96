#include "core/compiler/prune.h"

namespace ipuflow::compiler {

std::vector<bool> Prune(const Graph& graph, const ProgramSpec& spec,
                        const FeedIndex& feeds) {
  std::vector<bool> needed(graph.num_nodes(), false);
  std::vector<const Node*> stack;
  auto need = [&](const Node* n) {
    if (!needed[n->id()]) {
      needed[n->id()] = true;
      stack.push_back(n);
    }
  };
  for (const Output& f : spec.fetches) {
    if (!feeds.count(f)) need(f.node);
  }
  for (const Node* t : spec.targets) need(t);
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    for (const Output& in : n->inputs()) {
      if (!feeds.count(in)) need(in.node);
    }
    for (const Node* c : n->control_inputs()) need(c);
  }
  return needed;
}

}  // namespace ipuflow::compiler
