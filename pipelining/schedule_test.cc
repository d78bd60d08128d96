#include "pipelining/schedule.h"

#include <iostream>
#include <limits>
#include <ostream>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ipuflow::pipelining {

// Found by gtest through argument-dependent lookup.
void PrintTo(const WorkItem& item, std::ostream* os) {
  *os << WorkItemName(item);
}

namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr PipelineSchedule kGrouped = PipelineSchedule::kGrouped;
constexpr PipelineSchedule kInterleaved = PipelineSchedule::kInterleaved;
constexpr PipelineSchedule kSequential = PipelineSchedule::kSequential;

WorkItem F(int s, int m) { return {s, Pass::kForward, m}; }
WorkItem B(int s, int m) { return {s, Pass::kBackward, m}; }

ScheduleTable Make(PipelineSchedule kind, int n, std::vector<int> mapping,
                   int m, bool training) {
  absl::StatusOr<ScheduleTable> table =
      MakeSchedule(kind, n, mapping, m, training);
  EXPECT_TRUE(table.ok()) << table.status();
  return *table;
}

using Steps = std::vector<std::vector<WorkItem>>;

TEST(ScheduleTest, GroupedTrainingTwoStagesFourMicroBatches) {
  ScheduleTable t = Make(kGrouped, 2, {}, 4, true);
  EXPECT_EQ(t.num_ipus, 2);
  EXPECT_EQ(t.stage_ipu, (std::vector<int>{0, 1}));
  // F(s, t-s) then B(s, t-3+s): M + 2N - 1 = 7 steps.
  EXPECT_EQ(t.steps, (Steps{{F(0, 0)},
                            {F(0, 1), F(1, 0)},
                            {F(0, 2), F(1, 1), B(1, 0)},
                            {F(0, 3), F(1, 2), B(1, 1), B(0, 0)},
                            {F(1, 3), B(1, 2), B(0, 1)},
                            {B(1, 3), B(0, 2)},
                            {B(0, 3)}}));
  EXPECT_EQ(ScheduleTableToString(t),
            "IPU0 | F0   F1   F2   F3B0 B1   B2   B3\n"
            "IPU1 | .    F0   F1B0 F2B1 F3B2 B3   .\n");
  EXPECT_TRUE(VerifyScheduleTable(t).ok());
}

TEST(ScheduleTest, InterleavedTrainingTwoStagesFourMicroBatches) {
  ScheduleTable t = Make(kInterleaved, 2, {}, 4, true);
  // F(s,m) in step 2m+s, B(s,m) in step 2m+3-s: 2M + 2N - 2 = 10 steps.
  EXPECT_EQ(t.steps, (Steps{{F(0, 0)},
                            {F(1, 0)},
                            {F(0, 1), B(1, 0)},
                            {F(1, 1), B(0, 0)},
                            {F(0, 2), B(1, 1)},
                            {F(1, 2), B(0, 1)},
                            {F(0, 3), B(1, 2)},
                            {F(1, 3), B(0, 2)},
                            {B(1, 3)},
                            {B(0, 3)}}));
  EXPECT_EQ(ScheduleTableToString(t),
            "IPU0 | F0 .  F1 B0 F2 B1 F3 B2 .  B3\n"
            "IPU1 | .  F0 B0 F1 B1 F2 B2 F3 B3 .\n");
  EXPECT_THAT(ItemsOnIpu(t, 0),
              ElementsAre(F(0, 0), F(0, 1), B(0, 0), F(0, 2), B(0, 1), F(0, 3),
                          B(0, 2), B(0, 3)));
}

TEST(ScheduleTest, SequentialTrainingRunsOneItemPerStep) {
  ScheduleTable t = Make(kSequential, 2, {}, 2, true);
  EXPECT_EQ(t.steps, (Steps{{F(0, 0)},
                            {F(1, 0)},
                            {B(1, 0)},
                            {B(0, 0)},
                            {F(0, 1)},
                            {F(1, 1)},
                            {B(1, 1)},
                            {B(0, 1)}}));
}

TEST(ScheduleTest, InferenceTables) {
  const Steps pipelined = {{F(0, 0)},
                           {F(0, 1), F(1, 0)},
                           {F(0, 2), F(1, 1)},
                           {F(0, 3), F(1, 2)},
                           {F(1, 3)}};
  EXPECT_EQ(Make(kGrouped, 2, {}, 4, false).steps, pipelined);
  EXPECT_EQ(Make(kInterleaved, 2, {}, 4, false).steps, pipelined);
  EXPECT_EQ(Make(kSequential, 2, {}, 2, false).steps,
            (Steps{{F(0, 0)}, {F(1, 0)}, {F(0, 1)}, {F(1, 1)}}));
}

TEST(ScheduleTest, StepCountsMatchClosedForms) {
  for (int n = 2; n <= 6; ++n) {
    for (int m : {1, n, 2 * n, 3 * n + 1}) {
      EXPECT_EQ(Make(kGrouped, n, {}, m, true).num_steps(), m + 2 * n - 1);
      EXPECT_EQ(Make(kGrouped, n, {}, m, false).num_steps(), m + n - 1);
      EXPECT_EQ(Make(kInterleaved, n, {}, m, true).num_steps(),
                2 * m + 2 * n - 2);
      EXPECT_EQ(Make(kInterleaved, n, {}, m, false).num_steps(), m + n - 1);
      EXPECT_EQ(Make(kSequential, n, {}, m, true).num_steps(), 2 * n * m);
      EXPECT_EQ(Make(kSequential, n, {}, m, false).num_steps(), n * m);
    }
  }
}

TEST(ScheduleTest, EveryGeneratedTableVerifies) {
  const std::vector<std::vector<int>> mappings = {
      {}, {3, 2, 1, 0}, {0, 1, 1, 0}, {0, 1, 0, 1}, {0, 0, 0, 0}, {2, 0, 2, 5}};
  for (PipelineSchedule kind : {kGrouped, kInterleaved, kSequential}) {
    for (const std::vector<int>& mapping : mappings) {
      for (int m : {1, 3, 4, 8, 13}) {
        for (bool training : {false, true}) {
          ScheduleTable t = Make(kind, 4, mapping, m, training);
          EXPECT_TRUE(VerifyScheduleTable(t).ok())
              << PipelineScheduleName(kind) << " m=" << m
              << " training=" << training << "\n"
              << VerifyScheduleTable(t) << "\n"
              << ScheduleTableToString(t);
        }
      }
    }
  }
}

TEST(ScheduleTest, SharedIpuInterleavedInferenceMovesClashingItems) {
  // Stages 0 and 2 share IPU 0, stages 1 and 3 share IPU 1.
  // F(0,2) wants step 2, where IPU 0 runs F(2,0): it moves to step 4.
  ScheduleTable t = Make(kInterleaved, 4, {0, 1, 0, 1}, 3, false);
  EXPECT_EQ(t.num_ipus, 2);
  EXPECT_EQ(ScheduleTableToString(t),
            "IPU0 | 0F0 0F1 2F0 2F1 0F2 .   2F2 .\n"
            "IPU1 | .   1F0 1F1 3F0 3F1 1F2 .   3F2\n");
}

TEST(ScheduleTest, GroupedRunsSharedStagesInOneStep) {
  ScheduleTable t = Make(kGrouped, 2, {0, 0}, 2, true);
  EXPECT_EQ(t.num_ipus, 1);
  EXPECT_EQ(t.steps, (Steps{{F(0, 0)},
                            {F(0, 1), F(1, 0)},
                            {F(1, 1), B(1, 0)},
                            {B(1, 1), B(0, 0)},
                            {B(0, 1)}}));
}

TEST(ScheduleTest, BadArgumentsAreInvalidArgument) {
  absl::StatusOr<ScheduleTable> t = MakeSchedule(kGrouped, 3, {0, 1}, 4, true);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(t.status().message(),
              HasSubstr("device_mapping [0, 1] has 2 entries for 3 stages"));
  t = MakeSchedule(kGrouped, 2, {0, -1}, 4, true);
  EXPECT_THAT(t.status().message(), HasSubstr("device_mapping[1] = -1"));
  t = MakeSchedule(kGrouped, 0, {}, 4, true);
  EXPECT_THAT(t.status().message(),
              HasSubstr("num_stages is 0; it must be between 1 and"));
  t = MakeSchedule(kInterleaved, 2, {}, 0, true);
  EXPECT_THAT(t.status().message(),
              HasSubstr("micro_batches (gradient_accumulation_count) is 0; it "
                        "must be between 1 and 16777216"));
  t = MakeSchedule(kGrouped, 2, {0, 1024}, 4, true);
  EXPECT_THAT(t.status().message(),
              HasSubstr("device_mapping[1] = 1024 is not an IPU index (it "
                        "must be between 0 and 1023)"));
  // The identity mapping's indices too (the options fuzzer's heap overflow
  // in 1F1B's one-stage-per-IPU check).
  t = MakeSchedule(PipelineSchedule::k1F1B, 1025, {}, 1025, true);
  EXPECT_THAT(t.status().message(),
              HasSubstr("1025 stages without a device_mapping would use IPUs "
                        "0 to 1024; IPU indices must be below 1024"));
  t = MakeSchedule(static_cast<PipelineSchedule>(9), 2, {}, 4, true);
  EXPECT_THAT(t.status().message(),
              HasSubstr("schedule is 9, not a PipelineSchedule (0 Grouped, 1 "
                        "Interleaved, 2 Sequential, 3 GPipe, 4 1F1B, 5 "
                        "Interleaved1F1B, 6 LoopedBFS, 7 Custom)"));
}

// Issue 22: 2 x N x M in int overflowed for M = 2^29 + 1 (SIGSEGV writing
// past the step vector; INT_MAX: bad_alloc). Now InvalidArgument naming the
// field, the value and the limit, before anything is allocated.
TEST(ScheduleTest, HugeMicroBatchCountsAreRefusedNotOverflowed) {
  for (int m : {(1 << 29) + 1, std::numeric_limits<int>::max()}) {
    for (PipelineSchedule kind : {kGrouped, kInterleaved, kSequential}) {
      absl::StatusOr<ScheduleTable> t = MakeSchedule(kind, 2, {}, m, true);
      ASSERT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << m;
      EXPECT_THAT(t.status().message(),
                  HasSubstr(absl::StrCat(
                      "micro_batches (gradient_accumulation_count) is ", m,
                      "; it must be between 1 and 16777216")));
    }
  }
  // Each factor within bounds, the product above: the product is named.
  absl::StatusOr<ScheduleTable> t =
      MakeSchedule(kGrouped, 4096, {}, 4096, true);
  EXPECT_THAT(t.status().message(),
              HasSubstr("passes x num_stages x micro_batches "
                        "(gradient_accumulation_count) = 2 x 4096 x 4096 = "
                        "33554432; the limit is 16777216"));
  // The largest table still builds.
  EXPECT_TRUE(MakeSchedule(kGrouped, 2, {}, 1 << 12, true).ok());
}

TEST(ScheduleTest, VerifyCatchesBrokenTables) {
  const ScheduleTable good = Make(kInterleaved, 2, {}, 4, true);

  ScheduleTable swapped = good;  // B(1,0) moved before F(1,0).
  std::swap(swapped.steps[1], swapped.steps[2]);
  EXPECT_THAT(VerifyScheduleTable(swapped).message(),
              HasSubstr("B s1 mb0 in step 1 must come after F s1 mb0, which "
                        "is in step 2"));

  ScheduleTable missing = good;
  missing.steps.pop_back();
  EXPECT_THAT(VerifyScheduleTable(missing).message(),
              HasSubstr("B s0 mb3 is missing"));

  ScheduleTable twice = good;
  twice.steps[9].push_back(B(0, 2));
  EXPECT_THAT(VerifyScheduleTable(twice).message(),
              HasSubstr("B s0 mb2 appears in steps 7 and 9"));

  ScheduleTable clash = good;  // B(0,3) in the same step as B(1,3).
  clash.steps[8] = {B(1, 3), B(0, 3)};
  clash.steps.pop_back();
  EXPECT_THAT(VerifyScheduleTable(clash).message(),
              HasSubstr("must come after B s1 mb3"));

  ScheduleTable order = good;
  std::swap(order.steps[2][0], order.steps[2][1]);
  EXPECT_THAT(VerifyScheduleTable(order).message(),
              HasSubstr("step 2: F s0 mb1 listed after B s1 mb0"));

  ScheduleTable not_exclusive = Make(kInterleaved, 2, {0, 0}, 1, false);
  not_exclusive.steps = {{F(0, 0)}, {F(1, 0)}};
  EXPECT_TRUE(VerifyScheduleTable(not_exclusive).ok());
  not_exclusive.micro_batches = 2;
  not_exclusive.steps = {{F(0, 0)}, {F(0, 1), F(1, 0)}, {F(1, 1)}};
  EXPECT_THAT(VerifyScheduleTable(not_exclusive).message(),
              HasSubstr("IPU 0 runs more than one item"));
}

constexpr PipelineSchedule kGPipe = PipelineSchedule::kGPipe;
constexpr PipelineSchedule k1F1B = PipelineSchedule::k1F1B;
constexpr PipelineSchedule kInterleaved1F1B =
    PipelineSchedule::kInterleaved1F1B;
constexpr PipelineSchedule kLoopedBFS = PipelineSchedule::kLoopedBFS;

// torch.distributed.pipelining, ScheduleGPipe: all forwards, then all
// backwards (ascending micro-batch); F(s,m) in step m+s.
TEST(ScheduleTest, GPipeTwoStagesFourMicroBatches) {
  ScheduleTable t = Make(kGPipe, 2, {}, 4, true);
  EXPECT_EQ(ScheduleTableToString(t),
            "IPU0 | F0 F1 F2 F3 .  .  B0 B1 B2 B3\n"
            "IPU1 | .  F0 F1 F2 F3 B0 B1 B2 B3 .\n");
  EXPECT_EQ(ScheduleTableToString(Make(kGPipe, 2, {}, 4, false)),
            "IPU0 | F0 F1 F2 F3 .\n"
            "IPU1 | .  F0 F1 F2 F3\n");
}

// torch.distributed.pipelining, Schedule1F1B: stage s warms up with
// min(M, N-s) forwards, then one backward, one forward, ...
TEST(ScheduleTest, OneFOneBFourStagesEightMicroBatches) {
  ScheduleTable t = Make(k1F1B, 4, {}, 8, true);
  EXPECT_EQ(ScheduleTableToString(t),
            "IPU0 | F0 F1 F2 F3 .  .  .  B0 F4 B1 F5 B2 F6 B3 F7 B4 .  B5 .  "
            "B6 .  B7\n"
            "IPU1 | .  F0 F1 F2 .  .  B0 F3 B1 F4 B2 F5 B3 F6 B4 F7 B5 .  B6 "
            ".  B7 .\n"
            "IPU2 | .  .  F0 F1 .  B0 F2 B1 F3 B2 F4 B3 F5 B4 F6 B5 F7 B6 .  "
            "B7 .  .\n"
            "IPU3 | .  .  .  F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7 "
            ".  .  .\n");
  EXPECT_EQ(t.num_steps(), 2 * 8 + 2 * 4 - 2);
}

// torch.distributed.pipelining, ScheduleInterleaved1F1B: 4 stages looped
// over 2 IPUs (stage s on IPU s mod 2), cells labelled "<stage>F<mb>".
TEST(ScheduleTest, Interleaved1F1BFourStagesOnTwoIpus) {
  ScheduleTable t = Make(kInterleaved1F1B, 4, {0, 1, 0, 1}, 4, true);
  EXPECT_EQ(t.num_ipus, 2);
  EXPECT_EQ(ScheduleTableToString(t),
            "IPU0 | 0F0 0F1 2F0 2F1 0F2 2B0 0F3 2B1 2F2 0B0 2F3 0B1 .   2B2 "
            ".   2B3 0B2 0B3\n"
            "IPU1 | .   1F0 1F1 3F0 3B0 3F1 3B1 1F2 1B0 1F3 1B1 3F2 3B2 3F3 "
            "3B3 1B2 1B3 .\n");
  // 2vM + 2(p-1) steps.
  EXPECT_EQ(t.num_steps(), 2 * 2 * 4 + 2);
}

// torch.distributed.pipelining, ScheduleLoopedBFS: the forwards stage by
// stage, then the backwards by descending stage (ascending micro-batch: the
// FIFO stash's order, where torch descends).
TEST(ScheduleTest, LoopedBfsFourStagesOnTwoIpus) {
  ScheduleTable t = Make(kLoopedBFS, 4, {0, 1, 0, 1}, 2, true);
  EXPECT_EQ(ScheduleTableToString(t),
            "IPU0 | 0F0 0F1 2F0 2F1 .   .   2B0 2B1 0B0 0B1\n"
            "IPU1 | .   1F0 1F1 3F0 3F1 3B0 3B1 1B0 1B1 .\n");
}

TEST(ScheduleTest, TorchSchedulesRefuseWhatTheyCannotBuild) {
  absl::StatusOr<ScheduleTable> t =
      MakeSchedule(k1F1B, 4, {0, 1, 1, 2}, 4, true);
  EXPECT_THAT(t.status().message(),
              HasSubstr("MakeSchedule: 1F1B runs one stage per IPU "
                        "(torch.distributed.pipelining, Schedule1F1B): "
                        "device_mapping [0, 1, 1, 2] puts stages 1 and 2 on "
                        "IPU 1"));
  t = MakeSchedule(kInterleaved1F1B, 4, {1, 0, 1, 0}, 4, true);
  EXPECT_THAT(t.status().message(),
              HasSubstr("Interleaved1F1B needs the looped placement of "
                        "torch.distributed.pipelining (stage s on IPU s mod "
                        "p): device_mapping [1, 0, 1, 0] puts stage 0 on IPU "
                        "1, not 0; for 4 stages on 2 IPUs use [0, 1, 0, 1]"));
  t = MakeSchedule(kInterleaved1F1B, 8, {0, 1, 2, 3, 0, 1, 2, 3}, 9, true);
  EXPECT_THAT(t.status().message(),
              HasSubstr("9 micro-batches on 4 IPUs make max(1, 9 / 4) = 2 "
                        "rounds; use 8 or 10"));
  t = MakeSchedule(PipelineSchedule::kCustom, 2, {}, 4, true);
  EXPECT_THAT(t.status().message(), HasSubstr("Custom has no generator"));
}

TEST(ScheduleTest, TorchTablesVerifyForManyShapes) {
  for (bool training : {true, false}) {
    for (int p : {1, 2, 3, 4}) {
      for (int m = 1; m <= 3 * p + 1; ++m) {
        for (PipelineSchedule kind : {kGPipe, k1F1B}) {
          ScheduleTable t = Make(kind, p, {}, m, training);
          EXPECT_TRUE(VerifyScheduleTable(t).ok()) << VerifyScheduleTable(t);
        }
        for (int v : {1, 2, 3}) {
          std::vector<int> looped(v * p);
          for (int s = 0; s < v * p; ++s) looped[s] = s % p;
          for (PipelineSchedule kind : {kInterleaved1F1B, kLoopedBFS}) {
            absl::StatusOr<ScheduleTable> t =
                MakeSchedule(kind, v * p, looped, m, training);
            if (kind == kInterleaved1F1B && m % std::max(1, m / p) != 0) {
              EXPECT_FALSE(t.ok());
              continue;
            }
            ASSERT_TRUE(t.ok()) << t.status();
            EXPECT_TRUE(VerifyScheduleTable(*t).ok())
                << PipelineScheduleName(kind) << " p=" << p << " v=" << v
                << " m=" << m << " " << VerifyScheduleTable(*t);
          }
        }
      }
    }
  }
}

TEST(ScheduleTest, NamesRoundTrip) {
  for (int v = 0; v < kNumPipelineSchedules; ++v) {
    const auto kind = static_cast<PipelineSchedule>(v);
    EXPECT_EQ(*PipelineScheduleFromName(PipelineScheduleName(kind)), kind);
  }
  EXPECT_EQ(*PipelineScheduleFromName("interleaved-1f1b"), kInterleaved1F1B);
  EXPECT_EQ(*PipelineScheduleFromName("Looped_BFS"), kLoopedBFS);
  EXPECT_THAT(PipelineScheduleFromName("zbv").status().message(),
              HasSubstr("'zbv' is not a pipeline schedule: use one of "
                        "Grouped, Interleaved, Sequential, GPipe, 1F1B, "
                        "Interleaved1F1B, LoopedBFS, Custom"));
}

TEST(ScheduleTest, IpuOrdersBecomeTheEarliestTable) {
  // 1F1B's orders for two stages: the replay finds Schedule1F1B's table.
  absl::StatusOr<ScheduleTable> t =
      ScheduleFromIpuOrders(PipelineSchedule::kCustom, 2, {0, 1}, 2, true,
                            {{F(0, 0), F(0, 1), B(0, 0), B(0, 1)},
                             {F(1, 0), B(1, 0), F(1, 1), B(1, 1)}});
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(ScheduleTableToString(*t),
            "IPU0 | F0 F1 .  B0 .  B1\n"
            "IPU1 | .  F0 B0 F1 B1 .\n");
}

TEST(ScheduleTest, BrokenIpuOrdersAreNamed) {
  // B(0,0) before F(0,0) on its own IPU: a deadlock, both IPUs named.
  absl::StatusOr<ScheduleTable> t =
      ScheduleFromIpuOrders(PipelineSchedule::kCustom, 2, {0, 1}, 1, true,
                            {{B(0, 0), F(0, 0)}, {F(1, 0), B(1, 0)}});
  EXPECT_THAT(t.status().message(),
              HasSubstr("deadlock: IPU 0 position 0 (B s0 mb0) waits for F "
                        "s0 mb0 (IPU 0 position 1, which never runs)"));
  EXPECT_THAT(t.status().message(),
              HasSubstr("deadlock: IPU 1 position 0 (F s1 mb0) waits for F "
                        "s0 mb0"));
  // Wrong IPU, twice, missing, out of range: all listed at once.
  t = ScheduleFromIpuOrders(PipelineSchedule::kCustom, 2, {0, 1}, 1, true,
                            {{F(0, 0), F(1, 0), F(0, 0), B(0, 3)}, {B(1, 0)}});
  EXPECT_THAT(t.status().message(), HasSubstr("5 error(s)"));
  EXPECT_THAT(t.status().message(),
              HasSubstr("IPU 0 position 1 (F s1 mb0): stage 1 runs on IPU 1"));
  EXPECT_THAT(t.status().message(),
              HasSubstr("IPU 0 position 2 (F s0 mb0) is also at position 0"));
  EXPECT_THAT(t.status().message(),
              HasSubstr("IPU 0 position 3 (B s0 mb3) is not an item"));
  EXPECT_THAT(t.status().message(), HasSubstr("F s1 mb0 is missing"));
  EXPECT_THAT(t.status().message(), HasSubstr("B s0 mb0 is missing"));
}

// Issue 31: every violated rule at once, on the step x IPU grid with the
// offending cells marked.
TEST(ScheduleTest, ValidateReportsEveryViolationOnTheGrid) {
  ScheduleTable t = Make(k1F1B, 2, {}, 2, true);
  ASSERT_EQ(ScheduleTableToString(t),
            "IPU0 | F0 F1 .  B0 .  B1\n"
            "IPU1 | .  F0 B0 F1 B1 .\n");
  t.steps = {{F(0, 0)},
             {F(0, 1), F(1, 0)},
             {B(1, 0), B(0, 0)},  // B(0,0) in the step of B(1,0).
             {F(1, 1)},
             {F(1, 0), B(1, 1)}};  // F(1,0) again; B(0,1) missing.
  const std::vector<ScheduleViolation> v = ValidateScheduleTable(t);
  ASSERT_EQ(v.size(), 4u);
  EXPECT_EQ(v[0].rule, ScheduleRule::kDuplicate);
  EXPECT_EQ(v[1].rule, ScheduleRule::kExclusive);
  EXPECT_EQ(v[2].rule, ScheduleRule::kDependency);
  EXPECT_EQ(v[3].rule, ScheduleRule::kMissing);
  EXPECT_EQ(ScheduleViolationsToString(t, v),
            "4 violation(s) of the 1F1B schedule table (2 stages, 2 "
            "micro-batches, training):\n"
            "IPU0 | F0     F1     [B0]   .      .\n"
            "IPU1 | .      F0     B0     F1     [F0B1]\n"
            "1. step 4, IPU 1, duplicate: F s1 mb0 appears in steps 1 and 4\n"
            "2. step 4, IPU 1, one item per IPU per step: step 4: IPU 1 runs "
            "more than one item (B s1 mb1 is the second); 1F1B allows one per "
            "IPU per step\n"
            "3. step 2, IPU 0, dependency: B s0 mb0 in step 2 must come after "
            "B s1 mb0, which is in step 2\n"
            "4. IPU 0, missing item: B s0 mb1 is missing\n");
  // VerifyScheduleTable keeps returning the first.
  EXPECT_EQ(VerifyScheduleTable(t).message(),
            "VerifyScheduleTable: F s1 mb0 appears in steps 1 and 4");
  EXPECT_TRUE(ValidateScheduleTable(Make(k1F1B, 2, {}, 2, true)).empty());
  // A stage's backwards out of micro-batch order (the FIFO stash would
  // hand B(1,1) micro-batch 0's activations).
  ScheduleTable reversed = Make(kGPipe, 2, {}, 2, true);
  ASSERT_EQ(ScheduleTableToString(reversed),
            "IPU0 | F0 F1 .  .  B0 B1\n"
            "IPU1 | .  F0 F1 B0 B1 .\n");
  std::swap(reversed.steps[3], reversed.steps[4]);
  const std::vector<ScheduleViolation> order = ValidateScheduleTable(reversed);
  ASSERT_FALSE(order.empty());
  EXPECT_EQ(order[0].rule, ScheduleRule::kMicroBatchOrder);
  EXPECT_THAT(order[0].message,
              HasSubstr("B s1 mb0 comes after micro-batch 1 of its stage and "
                        "pass: a stage runs its micro-batches in ascending "
                        "order"));
  // A table with the wrong shape is not scanned.
  ScheduleTable shapeless = t;
  shapeless.stage_ipu = {0};
  EXPECT_EQ(
      ScheduleViolationsToString(shapeless, ValidateScheduleTable(shapeless)),
      "1 violation(s) of the 1F1B schedule table (2 stages, 2 "
      "micro-batches, training):\n"
      "1. shape: stage_ipu has 1 entries for 2 stages\n");
}

}  // namespace
}  // namespace ipuflow::pipelining
