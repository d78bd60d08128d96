// For the phase tests: runs the phases that come before the one under test
// on a small graph, so each test starts from its phase's real inputs.
#ifndef IPUFLOW_CORE_COMPILER_TEST_GRAPH_H_
#define IPUFLOW_CORE_COMPILER_TEST_GRAPH_H_

#include <utility>
#include <vector>

#include "core/compiler/node_order.h"
#include "core/compiler/prune.h"
#include "core/compiler/shapes.h"
#include "core/compiler/spec_check.h"
#include "core/compiler/values.h"
#include "core/status.h"

namespace ipuflow::compiler {

struct FrontPhases {
  FeedIndex feeds;
  NodeOrder order;
  Values values;
  ValueTypes types;
};

// Spec check, prune, node order, values and shapes; aborts on an error (the
// tests that expect one call the phase directly).
inline FrontPhases RunFrontPhases(const Graph& graph, const ProgramSpec& spec) {
  FrontPhases f;
  absl::StatusOr<FeedIndex> feeds = CheckSpec(graph, spec);
  IPU_CHECK_OK(feeds.status());
  f.feeds = *std::move(feeds);
  absl::StatusOr<NodeOrder> order =
      OrderNodes(graph, spec, Prune(graph, spec, f.feeds));
  IPU_CHECK_OK(order.status());
  f.order = *std::move(order);
  f.values = AssignValues(f.order, spec, f.feeds);
  absl::StatusOr<ValueTypes> types =
      InferShapes(graph, spec, f.order, f.values);
  IPU_CHECK_OK(types.status());
  f.types = *std::move(types);
  return f;
}

inline ProgramSpec Spec(std::vector<Output> feeds,
                        std::vector<TensorShape> feed_shapes,
                        std::vector<Output> fetches,
                        std::vector<Node*> targets = {}) {
  ProgramSpec spec;
  spec.feeds = std::move(feeds);
  spec.feed_shapes = std::move(feed_shapes);
  spec.fetches = std::move(fetches);
  spec.targets = std::move(targets);
  return spec;
}

}  // namespace ipuflow::compiler

#endif  // IPUFLOW_CORE_COMPILER_TEST_GRAPH_H_
