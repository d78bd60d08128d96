#include "pipelining/planner.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ipuflow::pipelining {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr PipelineSchedule kGrouped = PipelineSchedule::kGrouped;
constexpr PipelineSchedule kInterleaved = PipelineSchedule::kInterleaved;
constexpr PipelineSchedule kSequential = PipelineSchedule::kSequential;

ScheduleTable Make(PipelineSchedule kind, int n, int m, bool training,
                   std::vector<int> mapping = {}) {
  absl::StatusOr<ScheduleTable> table =
      MakeSchedule(kind, n, mapping, m, training);
  EXPECT_TRUE(table.ok()) << table.status();
  return *table;
}

Plan MakePlan(const ScheduleTable& table, const StageCosts& costs,
              PlanTiming timing = PlanTiming::kDataflow) {
  absl::StatusOr<Plan> plan = PlanSchedule(table, costs, timing);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return *plan;
}

TEST(PlannerTest, InterleavedTwoStagesByHand) {
  Plan plan =
      MakePlan(Make(kInterleaved, 2, 4, true), StageCosts::Uniform(2, 1, 1));
  // IPU0 waits for B(1,0) (ends at 3) before B(0,0): one idle unit.
  EXPECT_EQ(PlanTimelineString(plan),
            "(1 column = 1 s)\n"
            "IPU0 | F0 F1 .  B0 F2 B1 F3 B2 .  B3\n"
            "IPU1 | .  F0 B0 F1 B1 F2 B2 F3 B3 .\n");
  EXPECT_DOUBLE_EQ(plan.makespan, 10);
  EXPECT_THAT(plan.ipu_busy, ElementsAre(8, 8));
  EXPECT_THAT(plan.ipu_utilisation, ElementsAre(0.8, 0.8));
  EXPECT_DOUBLE_EQ(plan.bubble, 0.2);
  EXPECT_DOUBLE_EQ(plan.theoretical_bubble, 0.2);  // 1 / (4 + 1).
  EXPECT_TRUE(plan.theory_applies);
  EXPECT_THAT(plan.stash_depths, ElementsAre(1, 0));
  EXPECT_THAT(plan.stash_occupancy, ElementsAre(2, 1));
  // Items come back in table order: step 2 is {F(0,1), B(1,0)}.
  ASSERT_EQ(plan.items.size(), 16u);
  const TimedItem& b10 = plan.items[3];
  EXPECT_EQ(b10.work_item(), (WorkItem{1, Pass::kBackward, 0}));
  EXPECT_EQ(b10.ipu, 1);
  EXPECT_DOUBLE_EQ(b10.start, 2);
  EXPECT_DOUBLE_EQ(b10.end, 3);
}

TEST(PlannerTest, GroupedTwoStagesByHand) {
  Plan plan =
      MakePlan(Make(kGrouped, 2, 4, true), StageCosts::Uniform(2, 1, 1));
  EXPECT_EQ(PlanTimelineString(plan),
            "(1 column = 1 s)\n"
            "IPU0 | F0 F1 F2 F3 B0 .  B1 .  B2 B3\n"
            "IPU1 | .  F0 F1 B0 F2 B1 F3 B2 B3 .\n");
  EXPECT_DOUBLE_EQ(plan.bubble, 0.2);
  EXPECT_THAT(plan.stash_occupancy, ElementsAre(3, 1));
}

TEST(PlannerTest, BalancedStagesGiveTheTextbookBubble) {
  for (PipelineSchedule kind : {kGrouped, kInterleaved}) {
    for (int n = 2; n <= 6; ++n) {
      for (int m : {n, 2 * n, 4 * n, 7}) {
        for (auto [f, b] : {std::pair{1.0, 1.0}, {1.0, 2.0}, {2.0, 1.0}}) {
          for (bool training : {true, false}) {
            Plan plan = MakePlan(Make(kind, n, m, training),
                                 StageCosts::Uniform(n, f, b));
            EXPECT_TRUE(plan.theory_applies);
            EXPECT_NEAR(plan.bubble, TheoreticalBubble(n, m), 1e-12)
                << PipelineScheduleName(kind) << " N=" << n << " M=" << m
                << " F=" << f << " B=" << b << " training=" << training;
            // One unit = F + B of one micro-batch on one stage.
            const double unit = training ? f + b : f;
            EXPECT_NEAR(plan.makespan, (m + n - 1) * unit, 1e-9);
          }
        }
      }
    }
  }
}

TEST(PlannerTest, UtilisationApproachesOneAsMicroBatchesGrow) {
  double previous = 0;
  for (int m : {4, 16, 64, 512}) {
    Plan plan =
        MakePlan(Make(kInterleaved, 4, m, true), StageCosts::Uniform(4, 1, 2));
    for (double u : plan.ipu_utilisation) EXPECT_GT(u, previous);
    previous = plan.ipu_utilisation[0];
  }
  EXPECT_GT(previous, 0.99);
}

TEST(PlannerTest, SequentialUsesOneIpuAtATime) {
  for (int n = 2; n <= 6; ++n) {
    for (bool training : {true, false}) {
      // Asking for dataflow timing does not matter: Sequential steps are
      // barriers (in dataflow, inference would pipeline).
      Plan plan = MakePlan(Make(kSequential, n, 3, training),
                           StageCosts::Uniform(n, 1, 2));
      EXPECT_EQ(plan.timing, PlanTiming::kLockstep);
      for (double u : plan.ipu_utilisation) EXPECT_NEAR(u, 1.0 / n, 1e-12);
      EXPECT_NEAR(plan.bubble, (n - 1.0) / n, 1e-12);
      EXPECT_NEAR(plan.theoretical_bubble, (n - 1.0) / n, 1e-12);
      EXPECT_TRUE(plan.theory_applies);
    }
  }
}

TEST(PlannerTest, LockstepShowsWhyGroupedIsUsuallyFaster) {
  // Backward twice as long as forward, N=4, M=16.
  const StageCosts costs = StageCosts::Uniform(4, 1, 2);
  const ScheduleTable grouped = Make(kGrouped, 4, 16, true);
  const ScheduleTable interleaved = Make(kInterleaved, 4, 16, true);
  // Dataflow: both reach (M + N - 1)(F + B) = 57.
  EXPECT_DOUBLE_EQ(MakePlan(grouped, costs).makespan, 57);
  EXPECT_DOUBLE_EQ(MakePlan(interleaved, costs).makespan, 57);
  // Lockstep: Grouped steps are 4 x F, 15 x (F+B), 4 x B = 57; Interleaved
  // steps are 4 x F then 34 steps that all contain a backward: 4 + 68 = 72.
  Plan g = MakePlan(grouped, costs, PlanTiming::kLockstep);
  Plan i = MakePlan(interleaved, costs, PlanTiming::kLockstep);
  EXPECT_DOUBLE_EQ(g.makespan, 57);
  EXPECT_DOUBLE_EQ(i.makespan, 72);
  EXPECT_FALSE(i.theory_applies);
  EXPECT_THAT(PlanDebugString(i), HasSubstr("not the case here"));
}

TEST(PlannerTest, TimedItemsRespectDependenciesAndIpuExclusivity) {
  const StageCosts costs = {{0.5, 2, 1, 0.25}, {1, 3, 0.5, 2}};
  for (PipelineSchedule kind : {kGrouped, kInterleaved, kSequential}) {
    for (std::vector<int> mapping :
         std::vector<std::vector<int>>{{}, {0, 1, 1, 0}, {1, 0, 2, 2}}) {
      for (PlanTiming timing : {PlanTiming::kDataflow, PlanTiming::kLockstep}) {
        Plan plan = MakePlan(Make(kind, 4, 8, true, mapping), costs, timing);
        std::map<std::tuple<int, int, int>, TimedItem> by_key;
        std::map<int, double> ipu_end;
        for (const TimedItem& it : plan.items) {
          by_key[{static_cast<int>(it.pass), it.stage, it.micro_batch}] = it;
        }
        auto end_of = [&](int pass, int stage, int m) {
          return by_key[std::make_tuple(pass, stage, m)].end;
        };
        for (const TimedItem& it : plan.items) {
          const int pass = static_cast<int>(it.pass);
          const double cost = it.pass == Pass::kForward
                                  ? costs.forward[it.stage]
                                  : costs.backward[it.stage];
          EXPECT_DOUBLE_EQ(it.duration(), cost);
          // Items of one IPU, in table order, never overlap.
          EXPECT_GE(it.start, ipu_end[it.ipu]);
          ipu_end[it.ipu] = it.end;
          if (pass == 0 && it.stage > 0) {
            EXPECT_GE(it.start, end_of(0, it.stage - 1, it.micro_batch));
          }
          if (pass == 1) {
            EXPECT_GE(it.start, end_of(0, it.stage, it.micro_batch));
            if (it.stage < 3) {
              EXPECT_GE(it.start, end_of(1, it.stage + 1, it.micro_batch));
            }
          }
        }
      }
    }
  }
}

TEST(PlannerTest, SharedIpusAreNotTheTextbookCase) {
  Plan plan = MakePlan(Make(kGrouped, 4, 8, true, {0, 1, 1, 0}),
                       StageCosts::Uniform(4, 1, 1));
  EXPECT_FALSE(plan.theory_applies);
  EXPECT_EQ(plan.table.num_ipus, 2);
  EXPECT_DOUBLE_EQ(plan.ipu_busy[0], 32);  // 2 stages x 8 x (F + B).
}

TEST(PlannerTest, DebugString) {
  Plan plan = MakePlan(Make(kInterleaved, 2, 4, true),
                       StageCosts::Uniform(2, 0.001, 0.002));
  const std::string s = PlanDebugString(plan);
  EXPECT_THAT(s, HasSubstr("Pipeline plan: Interleaved training, 2 stages on "
                           "2 IPUs (device_mapping [0, 1]), 4 micro-batches, "
                           "dataflow timing\n"));
  EXPECT_THAT(s, HasSubstr("forward [1 ms, 1 ms], backward [2 ms, 2 ms]"));
  EXPECT_THAT(s, HasSubstr("makespan 15 ms, 10 steps"));
  EXPECT_THAT(s, HasSubstr("IPU0: busy 12 ms, utilisation 80.0%"));
  EXPECT_THAT(s, HasSubstr("bubble: 20.0% measured, 20.0% theory "
                           "(N-1)/(M+N-1) = 1/5\n"));
  EXPECT_THAT(s, HasSubstr("FIFO depths [1, 0], measured peak live [2, 1]"));
  EXPECT_THAT(s, HasSubstr("(1 column = 1 ms)\nIPU0 | F0 F1 .  .  B0 B0"));
}

TEST(PlannerTest, BadCostsAndTables) {
  const ScheduleTable t = Make(kGrouped, 2, 4, true);
  absl::StatusOr<Plan> plan = PlanSchedule(t, {{1, 1}, {1}});
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(plan.status().message(),
              HasSubstr("backward costs have 1 entries for 2 stages"));
  plan = PlanSchedule(t, {{1, -2}, {1, 1}});
  EXPECT_THAT(plan.status().message(),
              HasSubstr("forward cost of stage 1 is -2"));
  // Inference needs no backward costs.
  EXPECT_TRUE(PlanSchedule(Make(kGrouped, 2, 4, false), {{1, 1}, {}}).ok());
  ScheduleTable broken = t;
  broken.steps.pop_back();
  EXPECT_THAT(
      PlanSchedule(broken, StageCosts::Uniform(2, 1, 1)).status().message(),
      HasSubstr("is missing"));
}

// Writes example pictures and traces next to the test log
// (bazel-testlogs/pipelining/planner_test/test.outputs/) for people to look at.
TEST(PlannerTest, WritesExampleArtifacts) {
  const char* dir = std::getenv("TEST_UNDECLARED_OUTPUTS_DIR");
  if (dir == nullptr) GTEST_SKIP() << "not run by bazel test";
  for (PipelineSchedule kind : {kGrouped, kInterleaved, kSequential}) {
    const int m = kind == kSequential ? 2 : 8;
    Plan plan = MakePlan(Make(kind, 4, m, true), StageCosts::Uniform(4, 1, 2));
    const std::string name = PipelineScheduleName(kind);
    SvgOptions options;
    options.title = absl::StrCat(name, " training, 4 stages, ", m,
                                 " micro-batches, B = 2F");
    std::ofstream(absl::StrCat(dir, "/", name, ".svg"))
        << ToSvgTimeline(plan.items, options);
    std::ofstream(absl::StrCat(dir, "/", name, ".json"))
        << ToChromeTraceJson(plan.items, name);
    std::ofstream(absl::StrCat(dir, "/", name, ".txt"))
        << PlanDebugString(plan);
  }
}

// torch.distributed.pipelining's schedules on modelled equal costs (T_F =
// T_B = 1 per stage): the measured bubble is the textbook value exactly,
// idle / ideal = (p-1)/(vM), and the peak stash is the formula of each
// schedule (stash.h), for p = 2, 4 IPUs and M = p, 2p, 4p.
TEST(PlannerTest, TorchSchedulesMeetTheirBubbleAndStashFormulas) {
  for (int p : {2, 4}) {
    for (int m : {p, 2 * p, 4 * p}) {
      for (PipelineSchedule kind :
           {PipelineSchedule::kGPipe, PipelineSchedule::k1F1B,
            PipelineSchedule::kInterleaved1F1B, PipelineSchedule::kLoopedBFS}) {
        const bool looped = IsLoopedSchedule(kind);
        for (int v : looped ? std::vector<int>{1, 2, 3} : std::vector<int>{1}) {
          const int n = v * p;
          std::vector<int> mapping(n);
          for (int s = 0; s < n; ++s) mapping[s] = s % p;
          const Plan plan = MakePlan(Make(kind, n, m, true, mapping),
                                     StageCosts::Uniform(n, 1, 1));
          const std::string what =
              absl::StrCat(PipelineScheduleName(kind), " p=", p, " v=", v,
                           " m=", m, "\n", PlanDebugString(plan));
          const double busy = 2.0 * v * m;  // Per IPU.
          EXPECT_DOUBLE_EQ(plan.makespan, busy + 2 * (p - 1)) << what;
          const double idle = plan.makespan * p - busy * p;
          EXPECT_NEAR(idle / (busy * p), (p - 1.0) / (v * m), 1e-12) << what;
          EXPECT_NEAR(plan.bubble, (p - 1.0) / (v * m + p - 1.0), 1e-12)
              << what;
          EXPECT_NEAR(plan.theoretical_bubble, plan.bubble, 1e-12) << what;
          EXPECT_TRUE(plan.theory_applies) << what;
          // The formulas, per IPU (= per stage for GPipe and 1F1B).
          std::vector<int> expected(p);
          for (int r = 0; r < p; ++r) {
            switch (kind) {
              case PipelineSchedule::kGPipe:
                expected[r] = m;
                break;
              case PipelineSchedule::k1F1B:
                expected[r] = std::min(m, p - r);
                break;
              case PipelineSchedule::kInterleaved1F1B: {
                const int per_round = m / std::max(1, m / p);
                const int warmup =
                    std::min(v * m, (v - 1) * per_round + 2 * (p - 1 - r));
                expected[r] = warmup + (warmup < v * m ? 1 : 0);
                break;
              }
              default:
                expected[r] = v * m;
            }
          }
          EXPECT_EQ(plan.ipu_stash_peak, expected) << what;
          EXPECT_EQ(plan.predicted_ipu_stash_peak, expected) << what;
          if (!looped) {
            EXPECT_EQ(plan.stash_peak_entries, expected) << what;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace ipuflow::pipelining
