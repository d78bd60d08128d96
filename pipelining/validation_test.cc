#include "pipelining/validation.h"

#include <limits>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ipuflow::pipelining {
namespace {

using ::testing::HasSubstr;

constexpr PipelineSchedule kGrouped = PipelineSchedule::kGrouped;
constexpr PipelineSchedule kInterleaved = PipelineSchedule::kInterleaved;
constexpr PipelineSchedule kSequential = PipelineSchedule::kSequential;

TEST(ValidationTest, OverlapLengthsFollowGraphcore) {
  for (int n = 2; n <= 8; ++n) {
    EXPECT_EQ(OverlapLength(kGrouped, n, {}, true), 2 * n);
    EXPECT_EQ(OverlapLength(kGrouped, n, {}, false), n);
    // CircularUnion on [0..N-1, N-1..0] keeps the even offsets: N of them.
    EXPECT_EQ(OverlapLength(kInterleaved, n, {}, true), n) << n;
    EXPECT_EQ(OverlapLength(kInterleaved, n, {}, false), n);
    EXPECT_EQ(OverlapLength(kSequential, n, {}, true), 1);
    EXPECT_EQ(OverlapLength(kSequential, n, {}, false), 1);
  }
  // The reference's example: two IPUs shared by four stages.
  EXPECT_EQ(OverlapLength(kInterleaved, 4, {0, 1, 0, 1}, false), 2);
  // Grouped does not depend on the mapping.
  EXPECT_EQ(OverlapLength(kGrouped, 4, {0, 0, 1, 1}, true), 8);
}

TEST(ValidationTest, AcceptsTheWorkedValues) {
  // graphcore_tf_api.md section 2.2, "Worked values".
  for (int n = 2; n <= 4; ++n) {
    for (int k = 1; k <= 3; ++k) {
      EXPECT_TRUE(ValidatePipeline(kGrouped, n, {}, 2 * n * k, true).ok());
      EXPECT_TRUE(ValidatePipeline(kInterleaved, n, {}, n * k, true).ok());
      EXPECT_TRUE(ValidatePipeline(kGrouped, n, {}, n * k, false).ok());
      EXPECT_TRUE(ValidatePipeline(kInterleaved, n, {}, n * k, false).ok());
    }
    for (int gac : {1, 2, 7}) {
      EXPECT_TRUE(ValidatePipeline(kSequential, n, {}, gac, true).ok());
    }
  }
  EXPECT_TRUE(ValidatePipeline(kGrouped, 4, {0, 1, 1, 0}, 8, true).ok());
  EXPECT_TRUE(ValidatePipeline(kInterleaved, 4, {0, 1, 0, 1}, 4, false).ok());
}

TEST(ValidationTest, CountsBelowTheStageCountAreRejected) {
  absl::Status s = ValidatePipeline(kGrouped, 4, {}, 3, true);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "Invalid pipeline (Grouped training, 4 stages, device_mapping "
            "identity, gradient_accumulation_count 3):\n"
            "  gradient_accumulation_count 3 is smaller than the 4 stages "
            "(Grouped training): the pipeline would never have every IPU "
            "busy; use at least 4 (8, a multiple of the overlap length, also "
            "runs on Graphcore's port)");
  EXPECT_THAT(ValidatePipeline(kGrouped, 3, {}, 2, false).message(),
              HasSubstr("2 is smaller than the 3 stages (Grouped inference): "
                        "the pipeline would never have every IPU busy; use at "
                        "least 3 (3, a multiple"));
  EXPECT_THAT(ValidatePipeline(kInterleaved, 3, {}, 0, true).message(),
              HasSubstr("0 is smaller than the 3 stages (Interleaved "
                        "training)"));
  EXPECT_THAT(ValidatePipeline(kSequential, 3, {}, 0, true).message(),
              HasSubstr("gradient_accumulation_count 0 must be at least 1 "
                        "(Sequential training)"));
}

// Issue 22: upper bounds, the enum and the table's size (a count of
// 2^29 + 1 passed here, then overflowed MakeSchedule's int arithmetic).
TEST(ValidationTest, UpperBoundsEnumAndProduct) {
  for (int gac : {(1 << 29) + 1, std::numeric_limits<int>::max()}) {
    EXPECT_THAT(ValidatePipeline(kGrouped, 2, {}, gac, true).message(),
                HasSubstr(absl::StrCat("gradient_accumulation_count is ", gac,
                                       "; it must be between 2 and "
                                       "16777216")));
  }
  EXPECT_THAT(ValidatePipeline(kGrouped, 1024, {}, 16384, true).message(),
              HasSubstr("passes x stages x gradient_accumulation_count = 2 x "
                        "1024 x 16384 = 33554432; the limit is 16777216"));
  EXPECT_THAT(
      ValidatePipeline(static_cast<PipelineSchedule>(9), 2, {}, 4, true)
          .message(),
      HasSubstr("pipeline_schedule is 9, not a PipelineSchedule (0 Grouped, "
                "1 Interleaved, 2 Sequential, 3 GPipe, 4 1F1B, 5 "
                "Interleaved1F1B, 6 LoopedBFS, 7 Custom)"));
  EXPECT_THAT(ValidatePipeline(kGrouped, 2, {0, 1 << 30}, 4, true).message(),
              HasSubstr("device_mapping[1] = 1073741824 is not an IPU index "
                        "(it must be between 0 and 1023)"));
}

TEST(ValidationTest, NoDivisibilityRule) {
  // Graphcore's port rejects these (not multiples of the overlap length);
  // ipuflow runs the exact table, e.g. the PopTorch tutorial's 10 on 4.
  EXPECT_TRUE(ValidatePipeline(kGrouped, 4, {}, 10, true).ok());
  EXPECT_TRUE(ValidatePipeline(kGrouped, 3, {}, 10, false).ok());
  EXPECT_TRUE(ValidatePipeline(kInterleaved, 3, {}, 7, true).ok());
  EXPECT_EQ(MinimumGradientAccumulationCount(kGrouped, 4), 4);
  EXPECT_EQ(MinimumGradientAccumulationCount(kSequential, 4), 1);
}

TEST(ValidationTest, StageAndMappingRules) {
  EXPECT_THAT(ValidatePipeline(kGrouped, 1, {}, 2, true).message(),
              HasSubstr("a pipeline needs at least two stages, got 1"));
  EXPECT_THAT(ValidatePipeline(kGrouped, 3, {0, 1}, 6, true).message(),
              HasSubstr("device_mapping [0, 1] has 2 entries for 3 stages: "
                        "map each stage to one IPU, e.g. [0, 1, 2]"));
  EXPECT_THAT(ValidatePipeline(kGrouped, 2, {0, -1}, 4, true).message(),
              HasSubstr("device_mapping[1] = -1 is not an IPU index"));
  EXPECT_THAT(
      ValidatePipeline(kInterleaved, 4, {0, 1, 1, 0}, 4, true).message(),
      HasSubstr("Interleaved training cannot run several stages on one IPU "
                "(IPU 0 has stages 0, 3; IPU 1 has stages 1, 2 in "
                "device_mapping [0, 1, 1, 0]): use PipelineSchedule::kGrouped, "
                "or one IPU per stage such as [0, 1, 2, 3]"));
  // Sharing is fine for Interleaved inference and for Grouped training.
  EXPECT_TRUE(ValidatePipeline(kInterleaved, 2, {0, 0}, 2, false).ok());
  EXPECT_TRUE(ValidatePipeline(kGrouped, 2, {0, 0}, 4, true).ok());
}

TEST(ValidationTest, ReportsEveryViolationOneLineEach) {
  absl::Status s = ValidatePipeline(kInterleaved, 4, {0, 1, 1}, 2, true);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  std::vector<std::string> lines = absl::StrSplit(s.message(), '\n');
  ASSERT_EQ(lines.size(), 4u) << s.message();
  EXPECT_THAT(lines[0], HasSubstr("Invalid pipeline (Interleaved training, 4 "
                                  "stages, device_mapping [0, 1, 1]"));
  EXPECT_THAT(lines[1], HasSubstr("has 3 entries for 4 stages"));
  EXPECT_THAT(lines[2], HasSubstr("IPU 1 has stages 1, 2"));
  EXPECT_THAT(lines[3], HasSubstr("2 is smaller than the 4 stages"));

  s = ValidatePipeline(kGrouped, 1, {0, 0}, 0, true);
  lines = absl::StrSplit(s.message(), '\n');
  ASSERT_EQ(lines.size(), 4u) << s.message();
  EXPECT_THAT(lines[1], HasSubstr("at least two stages, got 1"));
  EXPECT_THAT(lines[2], HasSubstr("has 2 entries for 1 stages"));
  EXPECT_THAT(lines[3], HasSubstr("0 is smaller than the 1 stages"));
}

// torch.distributed.pipelining's rules, listed with the others.
TEST(ValidationTest, TorchSchedulesFollowTorchsRules) {
  // 1F1B: M >= N, torch's text with both values.
  EXPECT_THAT(
      ValidatePipeline(PipelineSchedule::k1F1B, 4, {}, 3, true).message(),
      HasSubstr("gradient_accumulation_count 3 is smaller than the 4 "
                "stages (1F1B training): torch.distributed."
                "pipelining's Schedule1F1B refuses it (\"Number of "
                "microbatches (3) must be greater than or equal to "
                "the number of stages (4).\"); use at least 4, or "
                "GPipe"));
  EXPECT_TRUE(ValidatePipeline(PipelineSchedule::k1F1B, 4, {}, 4, true).ok());
  // GPipe has no lower bound beyond 1.
  EXPECT_TRUE(ValidatePipeline(PipelineSchedule::kGPipe, 4, {}, 1, true).ok());
  // One stage per IPU for GPipe and 1F1B.
  EXPECT_THAT(
      ValidatePipeline(PipelineSchedule::kGPipe, 4, {0, 0, 1, 1}, 8, true)
          .message(),
      HasSubstr("GPipe runs one stage per IPU (torch.distributed.pipelining, "
                "ScheduleGPipe): device_mapping [0, 0, 1, 1] puts stages 0 "
                "and 1 on IPU 0"));
  // The looped placement for Interleaved1F1B and LoopedBFS.
  EXPECT_THAT(ValidatePipeline(PipelineSchedule::kInterleaved1F1B, 4,
                               {0, 0, 1, 1}, 4, true)
                  .message(),
              HasSubstr("device_mapping [0, 0, 1, 1] puts stage 1 on IPU 0, "
                        "not 1; for 4 stages on 2 IPUs use [0, 1, 0, 1]"));
  EXPECT_THAT(ValidatePipeline(PipelineSchedule::kLoopedBFS, 6,
                               {0, 1, 2, 3, 0, 1}, 4, true)
                  .message(),
              HasSubstr("spreads 6 stages over 4 IPUs"));
  EXPECT_TRUE(ValidatePipeline(PipelineSchedule::kInterleaved1F1B, 8,
                               {0, 1, 2, 3, 0, 1, 2, 3}, 8, true)
                  .ok());
  // Interleaved1F1B: M a multiple of its rounds (torch's "flex PP": 10 on 4
  // IPUs runs, 9 does not).
  EXPECT_TRUE(ValidatePipeline(PipelineSchedule::kInterleaved1F1B, 8,
                               {0, 1, 2, 3, 0, 1, 2, 3}, 10, true)
                  .ok());
  EXPECT_THAT(ValidatePipeline(PipelineSchedule::kInterleaved1F1B, 8,
                               {0, 1, 2, 3, 0, 1, 2, 3}, 9, true)
                  .message(),
              HasSubstr("Interleaved 1F1B requires the number of "
                        "micro-batches (gradient_accumulation_count) to be a "
                        "multiple of the number of rounds "
                        "(torch.distributed.pipelining, "
                        "ScheduleInterleaved1F1B): 9 micro-batches on 4 IPUs "
                        "make max(1, 9 / 4) = 2 rounds; use 8 or 10"));
}

}  // namespace
}  // namespace ipuflow::pipelining
