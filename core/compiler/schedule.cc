#include "core/compiler/schedule.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "core/op_registry.h"

namespace ipuflow::compiler {

absl::StatusOr<Schedule> MakeSchedule(const Graph& graph,
                                      const ProgramSpec& spec,
                                      const std::vector<bool>& needed) {
  Schedule schedule;
  schedule.position.assign(graph.num_nodes(), -1);
  for (int id = 0; id < graph.num_nodes(); ++id) {
    if (!needed[id]) continue;
    const Node* n = graph.node(id);
    if (n->op_def().needs_feed()) {
      std::string fetch_names;
      for (const Output& f : spec.fetches) absl::StrAppend(&fetch_names, " '", f.name(), "'");
      return absl::InvalidArgumentError(absl::StrCat(
          n->DebugName(), " needs a value: feed it (fetching", fetch_names,
          ")"));
    }
    if (n->ipu() < -1 || n->ipu() >= kMaxShards) {
      return absl::InvalidArgumentError(absl::StrCat(
          n->DebugName(), " is placed on IPU ", n->ipu(),
          ": IPUs are numbered 0 to ", kMaxShards - 1));
    }
    if (!n->op_def().kernel()) {
      return absl::UnimplementedError(
          absl::StrCat(n->DebugName(), ": op has no kernel"));
    }
    schedule.position[id] = schedule.size();
    schedule.nodes.push_back(n);
  }
  return schedule;
}

}  // namespace ipuflow::compiler
