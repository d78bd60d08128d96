#include "pipelining/stash.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pipelining/validation.h"

namespace ipuflow::pipelining {
namespace {

using ::testing::ElementsAre;

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

TEST(StashTest, DepthsFollowGraphcoreFifoRule) {
  // graphcore_tf_api.md section 2.3, N = 4.
  EXPECT_THAT(StashDepths(kGrouped, 4), ElementsAre(6, 4, 2, 0));
  EXPECT_THAT(StashDepths(kInterleaved, 4), ElementsAre(3, 2, 1, 0));
  EXPECT_THAT(StashDepths(kSequential, 4), ElementsAre(0, 0, 0, 0));
}

TEST(StashTest, TwoStageTablesByHand) {
  // Grouped N=2, M=4 (schedule_test.cc has the table). At the end of step 2
  // stage 0 has forwarded micro-batches 0, 1, 2 and backwarded none: 3 live
  // = depth 2 + 1. Stage 1 at the end of step 2: F0, F1 done, B0 done: 1.
  EXPECT_THAT(MeasureStashOccupancy(Make(kGrouped, 2, 4, true)),
              ElementsAre(3, 1));
  // Interleaved: IPU0 runs F0 . F1 B0 ...: 2 live after step 2.
  EXPECT_THAT(MeasureStashOccupancy(Make(kInterleaved, 2, 4, true)),
              ElementsAre(2, 1));
  EXPECT_THAT(MeasureStashOccupancy(Make(kSequential, 2, 4, true)),
              ElementsAre(1, 1));
}

TEST(StashTest, MeasuredOccupancyIsDepthPlusOne) {
  for (PipelineSchedule kind : {kGrouped, kInterleaved, kSequential}) {
    for (int n = 2; n <= 6; ++n) {
      const int overlap = OverlapLength(kind, n, {}, true);
      for (int k : {1, 2, 3, 5}) {
        const int m = k * overlap;
        std::vector<int> expected = StashDepths(kind, n);
        for (int& d : expected) ++d;
        EXPECT_EQ(MeasureStashOccupancy(Make(kind, n, m, true)), expected)
            << PipelineScheduleName(kind) << " N=" << n << " M=" << m;
      }
    }
  }
}

TEST(StashTest, FewMicroBatchesNeverFillTheFifo) {
  // With M = 2 < 2N, Grouped stage 0 never holds more than 2.
  EXPECT_THAT(MeasureStashOccupancy(Make(kGrouped, 4, 2, true)),
              ElementsAre(2, 2, 2, 1));
}

TEST(StashTest, InferenceStashesNothing) {
  EXPECT_THAT(MeasureStashOccupancy(Make(kGrouped, 3, 6, false)),
              ElementsAre(0, 0, 0));
}

TEST(StashTest, PeakEntries) {
  // Grouped: within a step a stage's forward lands before its backward
  // takes an entry, one more than at the step boundary (depth + 2).
  EXPECT_THAT(PeakStashEntries(Make(kGrouped, 4, 16, true)),
              ElementsAre(8, 6, 4, 2));
  // One item per IPU per step: the step-boundary occupancy (depth + 1).
  EXPECT_THAT(PeakStashEntries(Make(kInterleaved, 4, 16, true)),
              ElementsAre(4, 3, 2, 1));
  EXPECT_THAT(PeakStashEntries(Make(kSequential, 4, 3, true)),
              ElementsAre(1, 1, 1, 1));
  EXPECT_THAT(PeakStashEntries(Make(kGrouped, 3, 6, false)),
              ElementsAre(0, 0, 0));
}

TEST(StashTest, GroupedMemoryIsTwiceInterleaved) {
  // "Grouped stores more activations than Interleaved": total FIFO slots
  // N(N-1) vs N(N-1)/2.
  for (int n = 2; n <= 6; ++n) {
    int grouped = 0, interleaved = 0;
    for (int d : StashDepths(kGrouped, n)) grouped += d;
    for (int d : StashDepths(kInterleaved, n)) interleaved += d;
    EXPECT_EQ(grouped, n * (n - 1));
    EXPECT_EQ(interleaved, n * (n - 1) / 2);
  }
}

}  // namespace
}  // namespace ipuflow::pipelining
