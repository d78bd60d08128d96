#include "core/compiler/spec_check.h"

#include "absl/strings/str_cat.h"

namespace ipuflow::compiler {

absl::StatusOr<FeedIndex> CheckSpec(const Graph& graph,
                                    const ProgramSpec& spec) {
  if (spec.feed_shapes.size() != spec.feeds.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("ProgramSpec has ", spec.feeds.size(), " feeds but ",
                     spec.feed_shapes.size(), " feed shapes"));
  }
  FeedIndex feed_index;
  for (size_t i = 0; i < spec.feeds.size(); ++i) {
    const Output& f = spec.feeds[i];
    if (!f.valid() || f.node->graph() != &graph) {
      return absl::InvalidArgumentError(
          absl::StrCat("feed ", i, " is not an output of this graph"));
    }
    if (!spec.feed_shapes[i].IsFullyDefined() ||
        !spec.feed_shapes[i].IsCompatibleWith(f.shape())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "value fed to '", f.name(), "' has shape ",
          spec.feed_shapes[i].DebugString(), " but ", f.node->DebugName(),
          " expects ", f.shape().DebugString()));
    }
    feed_index[f] = static_cast<int>(i);
  }
  for (const Output& f : spec.fetches) {
    if (!f.valid() || f.node->graph() != &graph) {
      return absl::InvalidArgumentError(
          "a fetch is not an output of this graph (built from a failed op?)");
    }
  }
  for (const Node* t : spec.targets) {
    if (t == nullptr || t->graph() != &graph) {
      return absl::InvalidArgumentError(
          "a target is not a node of this graph (built from a failed op?)");
    }
  }
  return feed_index;
}

}  // namespace ipuflow::compiler
