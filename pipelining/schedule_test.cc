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

}  // namespace
}  // namespace ipuflow::pipelining
