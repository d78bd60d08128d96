#include "core/compiler/dependencies.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "core/op_registry.h"

namespace ipuflow::compiler {

Dependencies FindDependencies(const Schedule& schedule, const Values& values) {
  Dependencies deps;
  deps.preds.resize(schedule.size());
  // Per variable: its last write and the reads since.
  absl::flat_hash_map<std::string, std::pair<int, std::vector<int>>> last_access;
  absl::flat_hash_set<std::string> variables;
  for (int pos = 0; pos < schedule.size(); ++pos) {
    const Node* n = schedule.nodes[pos];
    std::set<int>& preds = deps.preds[pos];
    for (int v : values.inputs[pos]) {
      if (values.producer[v] >= 0) preds.insert(values.producer[v]);
    }
    for (const Node* c : n->control_inputs()) preds.insert(schedule.position[c->id()]);
    const ResourceAccess access = n->op_def().resource_access();
    if (access == ResourceAccess::kNone) continue;
    const std::string key = ResourceKey(*n);
    auto& [last_write, reads] =
        last_access.try_emplace(key, -1, std::vector<int>()).first->second;
    variables.insert(key);
    if (last_write >= 0) preds.insert(last_write);
    if (access == ResourceAccess::kWrite) {
      for (int r : reads) preds.insert(r);
      reads.clear();
      last_write = pos;
    } else {
      reads.push_back(pos);
    }
  }
  deps.variables.assign(variables.begin(), variables.end());
  std::sort(deps.variables.begin(), deps.variables.end());
  return deps;
}

}  // namespace ipuflow::compiler
