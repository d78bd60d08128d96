// Always-live memory: constants and variables, per shard.
#include "core/compiler/always_live.h"

#include "core/compiler/test_graph.h"
#include "core/scope.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/math/add.h"
#include "ops/state/read_variable.h"
#include "ops/state/variable.h"

namespace ipuflow::compiler {
namespace {

TEST(AlwaysLiveTest, ConstantsAndVariablesPerShard) {
  Scope s = Scope::NewRootScope();
  Output c = ops::Const<float>(s, {1, 2, 3}, {3});  // 12 B
  Output v = ops::Variable(s.WithIpu(2).WithOpName("v"), DType::kFloat32,
                           {2, 3});  // 24 B
  Output w =
      ops::Variable(s.WithIpu(2).WithOpName("w"), DType::kInt32, {5});  // 20 B
  Output sum = ops::Add(s.WithIpu(2), ops::ReadVariable(s.WithIpu(2), w),
                        ops::Const<int32_t>(s.WithIpu(2), {1}, {1}));  // 4 B
  Output out = ops::Add(s, c, ops::ReadVariable(s, v));
  ASSERT_TRUE(s.ok()) << s.status();
  const FrontPhases f = RunFrontPhases(*s.graph(), Spec({}, {}, {out, sum}));
  const std::vector<MemoryPlan> shards = CountAlwaysLive(f.order);
  ASSERT_EQ(shards.size(), 3u);  // Up to the highest IPU used.
  EXPECT_EQ(shards[0].constant_bytes, 12);
  EXPECT_EQ(shards[0].variable_bytes, 0);
  EXPECT_EQ(shards[1].constant_bytes + shards[1].variable_bytes, 0);
  EXPECT_EQ(shards[2].constant_bytes, 4);
  EXPECT_EQ(shards[2].variable_bytes, 44);
  using Var = std::pair<const Node*, int64_t>;
  EXPECT_EQ(shards[2].variables,
            (std::vector<Var>{{v.node, 24}, {w.node, 20}}));
  // Only the always-live categories are filled in.
  EXPECT_EQ(shards[0].always_live_bytes, 0);
  EXPECT_EQ(shards[0].peak_bytes, 0);
}

TEST(AlwaysLiveTest, AnEmptyProgramHasOneShard) {
  EXPECT_EQ(CountAlwaysLive(NodeOrder{}).size(), 1u);
}

}  // namespace
}  // namespace ipuflow::compiler
