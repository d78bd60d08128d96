#include "core/compiler/dependencies.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "core/op_registry.h"

namespace ipuflow::compiler {

Dependencies FindDependencies(const NodeOrder& order, const Values& values) {
  Dependencies deps;
  deps.preds.resize(order.size());
  absl::flat_hash_set<std::string> variables;
  for (int pos = 0; pos < order.size(); ++pos) {
    const Node* n = order.nodes[pos];
    std::set<int>& preds = deps.preds[pos];
    for (int v : values.inputs[pos]) {
      if (values.producer[v] >= 0) preds.insert(values.producer[v]);
    }
    for (const Node* c : n->control_inputs())
      preds.insert(order.position[c->id()]);
    if (n->op_def().resource_access() != ResourceAccess::kNone) {
      variables.insert(ResourceKey(*n));
    }
  }
  VariableOrderEdges(order.nodes,
                     [&](int from, int to) { deps.preds[to].insert(from); });
  deps.variables.assign(variables.begin(), variables.end());
  std::sort(deps.variables.begin(), deps.variables.end());
  return deps;
}

}  // namespace ipuflow::compiler
