// Prune: only ancestors of the fetches and targets, through data and control
// inputs, and never through a fed output.
#include "core/compiler/prune.h"

#include "core/compiler/test_graph.h"
#include "core/scope.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/math/add.h"
#include "ops/state/no_op.h"

namespace ipuflow::compiler {
namespace {

std::vector<bool> PruneFor(const Graph& g, const ProgramSpec& spec) {
  absl::StatusOr<FeedIndex> feeds = CheckSpec(g, spec);
  IPU_CHECK_OK(feeds.status());
  return Prune(g, spec, *feeds);
}

TEST(PruneTest, KeepsAncestorsOfFetchesAndTheirControlInputs) {
  Scope s = Scope::NewRootScope();
  Output a = ops::Const(s, 1.f);                                    // 0
  Output unused = ops::Add(s, a, a);                                // 1
  Node* before = ops::NoOp(s);                                      // 2
  Output c = ops::Const(s.WithControlDependencies({before}), 2.f);  // 3
  Output b = ops::Add(s, a, c);                                     // 4
  ops::Add(s, b, unused);  // 5: after b.
  ASSERT_EQ(b.node->id(), 4);
  EXPECT_EQ(PruneFor(*s.graph(), Spec({}, {}, {b})),
            (std::vector<bool>{true, false, true, true, true, false}));
}

TEST(PruneTest, TargetsAreNeededToo) {
  Scope s = Scope::NewRootScope();
  Output a = ops::Const(s, 1.f);                                 // 0
  Output b = ops::Add(s, a, a);                                  // 1
  Node* group = ops::NoOp(s.WithControlDependencies({b.node}));  // 2
  Output c = ops::Const(s, 3.f);                                 // 3
  EXPECT_EQ(PruneFor(*s.graph(), Spec({}, {}, {c}, {group})),
            (std::vector<bool>{true, true, true, true}));
  EXPECT_EQ(PruneFor(*s.graph(), Spec({}, {}, {c})),
            (std::vector<bool>{false, false, false, true}));
}

TEST(PruneTest, AFeedCutsTheGraph) {
  Scope s = Scope::NewRootScope();
  Output x = ops::Placeholder(s, DType::kFloat32, {2});  // 0
  Output y = ops::Add(s, x, x);                          // 1
  Output z = ops::Add(s, y, y);                          // 2
  Output w = ops::Add(s, z, x);                          // 3
  // y fed: x and the node computing y are not run.
  EXPECT_EQ(PruneFor(*s.graph(), Spec({y}, {TensorShape({2})}, {z})),
            (std::vector<bool>{false, false, true, false}));
  // w still reads x itself: x is needed (and must be fed, see node order).
  EXPECT_EQ(PruneFor(*s.graph(), Spec({y}, {TensorShape({2})}, {w})),
            (std::vector<bool>{true, false, true, true}));
  // Fetching a fed value runs nothing.
  EXPECT_EQ(PruneFor(*s.graph(), Spec({y}, {TensorShape({2})}, {y})),
            (std::vector<bool>{false, false, false, false}));
}

}  // namespace
}  // namespace ipuflow::compiler
