// Memory report: per-shard and total MemoryPlans; a loop body's peak sits on
// top of the highest byte in use at its node.
#include "core/compiler/memory_report.h"

#include "core/scope.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"

namespace ipuflow::compiler {
namespace {

TEST(MemoryReportTest, HandComputedPeaksAndTotals) {
  Scope s = Scope::NewRootScope();
  NodeOrder order;
  for (const char* name : {"first", "loop1", "loop2"}) {
    order.nodes.push_back(ops::Const(s.WithOpName(name), 1.f).node);
  }
  std::vector<MemoryPlan> always_live(2);
  always_live[0].constant_bytes = 16;
  always_live[0].variable_bytes = 24;
  always_live[0].variables = {{order.nodes[0], 24}};
  always_live[0].loop_body_always_live_bytes = 8;
  always_live[1].constant_bytes = 4;
  Liveness live;
  // Shard 0: value 0 at [0, 64) over positions 0-2, value 1 at [64, 192)
  // at 1; shard 1: value 2 at [0, 64) over 0-2.
  live.intervals = {Interval{0, 0, 0, 2, 64, 0, 0},
                    Interval{1, 0, 1, 1, 128, 64, 64},
                    Interval{2, 1, 0, 2, 64, 0, 192}};
  live.fetch_bytes = 100;  // 60 of them fed values fetched back.
  live.shard_fetch_bytes = {32, 8};
  ArenaLayout layout{{192, 64}, {0, 192}, 256};
  const std::vector<SubProgramNeed> needs = {
      {1, {100, 0}, {true, false}},
      {2, {250, 30}, {true, true}},
  };
  const MemoryReport r = ReportMemory(order, always_live, needs, live, layout);
  ASSERT_EQ(r.shards.size(), 2u);
  const MemoryPlan& s0 = r.shards[0];
  // At 1 bytes up to 192 are in use: 192 + 100; at 2 up to 64: 64 + 250.
  EXPECT_EQ(s0.peak_bytes, 314);
  EXPECT_EQ(s0.loop_body_peak_bytes, 250);
  EXPECT_EQ(s0.largest_loop_body, "loop2");
  EXPECT_EQ(s0.always_live_bytes, 40);
  EXPECT_EQ(s0.unplanned_bytes, 192);
  EXPECT_EQ(s0.num_planned_values, 2);
  EXPECT_EQ(s0.fetch_bytes, 32);
  const MemoryPlan& s1 = r.shards[1];
  EXPECT_EQ(s1.peak_bytes, 64 + 30);
  EXPECT_EQ(s1.largest_loop_body, "loop2");
  EXPECT_EQ(s1.always_live_bytes, 4);
  EXPECT_EQ(s1.unplanned_bytes, 64);
  EXPECT_EQ(s1.fetch_bytes, 8);
  const MemoryPlan& m = r.total;
  EXPECT_EQ(m.constant_bytes, 20);
  EXPECT_EQ(m.variable_bytes, 24);
  EXPECT_EQ(m.always_live_bytes, 44);
  EXPECT_EQ(m.peak_bytes, 314 + 94);
  EXPECT_EQ(m.unplanned_bytes, 256);
  EXPECT_EQ(m.num_planned_values, 3);
  EXPECT_EQ(m.fetch_bytes, 100);
  EXPECT_EQ(m.loop_body_always_live_bytes, 8);
  EXPECT_EQ(m.loop_body_peak_bytes, 250);
  EXPECT_EQ(m.largest_loop_body, "loop2");
  EXPECT_EQ(m.variables.size(), 1u);
}

TEST(MemoryReportTest, WithoutLoopsThePeakIsTheArenaRegion) {
  NodeOrder order;
  Liveness live;
  live.intervals = {Interval{0, 0, 0, 0, 64, 0, 0}};
  live.shard_fetch_bytes = {0};
  const MemoryReport r = ReportMemory(order, std::vector<MemoryPlan>(1), {},
                                      live, ArenaLayout{{64}, {0}, 64});
  EXPECT_EQ(r.total.peak_bytes, 64);
  EXPECT_TRUE(r.total.largest_loop_body.empty());
}

}  // namespace
}  // namespace ipuflow::compiler
