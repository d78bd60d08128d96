// Schedule: needed nodes in id order; unfed placeholders are errors.
#include "core/compiler/schedule.h"

#include "core/compiler/test_graph.h"
#include "core/op_registry.h"
#include "core/scope.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/math/add.h"

namespace ipuflow::compiler {
namespace {

TEST(ScheduleTest, NeededNodesInIdOrder) {
  Scope s = Scope::NewRootScope();
  Output a = ops::Const(s.WithOpName("a"), 1.f);
  ops::Const(s.WithOpName("pruned"), 2.f);
  Output b = ops::Const(s.WithOpName("b"), 3.f);
  Output c = ops::Add(s.WithOpName("c"), b, a);
  ProgramSpec spec = Spec({}, {}, {c});
  absl::StatusOr<Schedule> schedule =
      MakeSchedule(*s.graph(), spec, {true, false, true, true});
  ASSERT_TRUE(schedule.ok()) << schedule.status();
  EXPECT_EQ(schedule->nodes,
            (std::vector<const Node*>{a.node, b.node, c.node}));
  EXPECT_EQ(schedule->position, (std::vector<int>{0, -1, 1, 2}));
}

TEST(ScheduleTest, AnUnfedPlaceholderNamesItselfAndTheFetches) {
  Scope s = Scope::NewRootScope();
  Output x = ops::Placeholder(s.WithOpName("images"), DType::kFloat32, {2});
  Output y = ops::Add(s.WithOpName("y"), x, x);
  absl::StatusOr<Schedule> schedule =
      MakeSchedule(*s.graph(), Spec({}, {}, {y}), {true, true});
  EXPECT_EQ(schedule.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(schedule.status().message(),
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
