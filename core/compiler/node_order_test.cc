// NodeOrder: needed nodes in id order on one shard, grouped by shard where
// the edges allow; unfed placeholders are errors.
#include "core/compiler/node_order.h"

#include "core/compiler/test_graph.h"
#include "core/op_registry.h"
#include "core/scope.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/math/add.h"
#include "ops/state/assign.h"
#include "ops/state/read_variable.h"
#include "ops/state/variable.h"

namespace ipuflow::compiler {
namespace {

TEST(ScheduleTest, NeededNodesInIdOrder) {
  Scope s = Scope::NewRootScope();
  Output a = ops::Const(s.WithOpName("a"), 1.f);
  ops::Const(s.WithOpName("pruned"), 2.f);
  Output b = ops::Const(s.WithOpName("b"), 3.f);
  Output c = ops::Add(s.WithOpName("c"), b, a);
  ProgramSpec spec = Spec({}, {}, {c});
  absl::StatusOr<NodeOrder> order =
      OrderNodes(*s.graph(), spec, {true, false, true, true});
  ASSERT_TRUE(order.ok()) << order.status();
  EXPECT_EQ(order->nodes, (std::vector<const Node*>{a.node, b.node, c.node}));
  EXPECT_EQ(order->position, (std::vector<int>{0, -1, 1, 2}));
}

std::vector<std::string> Names(const NodeOrder& order) {
  std::vector<std::string> names;
  for (const Node* n : order.nodes) names.push_back(std::string(n->name()));
  return names;
}

// Built alternating between two IPUs (as an optimizer builds its update
// variable by variable): each IPU's nodes run together, lowest id first.
TEST(ScheduleTest, IndependentNodesOfOneShardRunTogether) {
  Scope s = Scope::NewRootScope();
  Scope ipu0 = s.WithIpu(0), ipu1 = s.WithIpu(1);
  Output a0 = ops::Const(ipu0.WithOpName("a0"), 1.f);
  Output a1 = ops::Const(ipu1.WithOpName("a1"), 1.f);
  Output b0 = ops::Add(ipu0.WithOpName("b0"), a0, a0);
  Output b1 = ops::Add(ipu1.WithOpName("b1"), a1, a1);
  absl::StatusOr<NodeOrder> order =
      OrderNodes(*s.graph(), Spec({}, {}, {b0, b1}), {true, true, true, true});
  ASSERT_TRUE(order.ok()) << order.status();
  EXPECT_EQ(Names(*order), (std::vector<std::string>{"a0", "b0", "a1", "b1"}));
  EXPECT_EQ(order->position, (std::vector<int>{0, 2, 1, 3}));
}

// Data edges, control edges and a variable's accesses across shards keep
// their order; only what they leave free is grouped.
TEST(ScheduleTest, EdgesAndVariableAccessesKeepTheirOrderAcrossShards) {
  Scope s = Scope::NewRootScope();
  Scope ipu0 = s.WithIpu(0), ipu1 = s.WithIpu(1);
  Output v = ops::Variable(ipu0.WithOpName("v"), DType::kFloat32, {});  // 0
  Output c1 = ops::Const(ipu1.WithOpName("c1"), 2.f);                   // 1
  Node* w = ops::Assign(ipu1.WithOpName("w"), v, c1);                   // 2
  Output r = ops::ReadVariable(ipu0.WithOpName("r"), v);                // 3
  Output d0 = ops::Add(ipu0.WithOpName("d0"), r, r);                    // 4
  Output e1 = ops::Add(ipu1.WithOpName("e1"), d0, d0);                  // 5
  Output f0 = ops::Const(
      ipu0.WithOpName("f0").WithControlDependencies({e1.node}), 3.f);  // 6
  ASSERT_EQ(f0.node->id(), 6);
  absl::StatusOr<NodeOrder> order = OrderNodes(
      *s.graph(), Spec({}, {}, {e1, f0}, {w}), std::vector<bool>(7, true));
  ASSERT_TRUE(order.ok()) << order.status();
  // r is on IPU 0 but reads v after w (IPU 1) wrote it; e1 needs d0; f0
  // waits for e1 through its control edge.
  EXPECT_EQ(Names(*order),
            (std::vector<std::string>{"v", "c1", "w", "r", "d0", "e1", "f0"}));
}

TEST(ScheduleTest, AnUnfedPlaceholderNamesItselfAndTheFetches) {
  Scope s = Scope::NewRootScope();
  Output x = ops::Placeholder(s.WithOpName("images"), DType::kFloat32, {2});
  Output y = ops::Add(s.WithOpName("y"), x, x);
  absl::StatusOr<NodeOrder> order =
      OrderNodes(*s.graph(), Spec({}, {}, {y}), {true, true});
  EXPECT_EQ(order.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(order.status().message(),
            "Placeholder 'images' needs a value: feed it (fetching 'y:0')");
}

// The registry property the check relies on (no op names in the compiler).
TEST(ScheduleTest, PlaceholdersAndLoopArgumentsNeedAFeed) {
  for (const char* op : {"Placeholder", "_Arg"}) {
    EXPECT_TRUE((*OpRegistry::Global()->Find(op))->needs_feed()) << op;
  }
  for (const char* op : {"Const", "Variable", "Add"}) {
    EXPECT_FALSE((*OpRegistry::Global()->Find(op))->needs_feed()) << op;
  }
}

TEST(ScheduleTest, ShardOfAnUnplacedNodeIsZero) {
  Scope s = Scope::NewRootScope();
  Output a = ops::Const(s, 1.f);
  Output b = ops::Const(s.WithIpu(3), 1.f);
  EXPECT_EQ(ShardOf(a.node), 0);
  EXPECT_EQ(ShardOf(b.node), 3);
}

}  // namespace
}  // namespace ipuflow::compiler
