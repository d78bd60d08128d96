#include "pipelining/plan_pipeline_tool.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ipuflow::pipelining {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

std::string Report(const PlanPipelineOptions& options) {
  absl::StatusOr<std::string> report = RunPlanPipeline(options);
  EXPECT_TRUE(report.ok()) << report.status();
  return report.ok() ? *report : "";
}

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir == nullptr ? "/tmp" : dir) + "/" + name;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

TEST(PlanPipelineToolTest, DefaultsAreGroupedFourStagesEightMicroBatches) {
  const std::string report = Report({});
  EXPECT_THAT(report, HasSubstr("ValidatePipeline: OK\n"));
  EXPECT_THAT(report, HasSubstr("Grouped training, 4 stages on 4 IPUs"));
  EXPECT_THAT(report, HasSubstr("8 micro-batches, dataflow timing"));
  EXPECT_THAT(report, HasSubstr("forward [1 s, 1 s, 1 s, 1 s], "
                                "backward [2 s, 2 s, 2 s, 2 s]"));
  // (8 + 3) x (1 + 2) s; 3 of 11 units idle per IPU.
  EXPECT_THAT(report, HasSubstr("makespan 33 s"));
  EXPECT_THAT(report, HasSubstr("bubble: 27.3% measured, 27.3% theory "
                                "(N-1)/(M+N-1) = 3/11\n"));
  EXPECT_THAT(report, HasSubstr("FIFO depths [6, 4, 2, 0], measured peak "
                                "live [7, 5, 3, 1]"));
  EXPECT_THAT(report, HasSubstr("IPU3 |"));  // The text timeline.
}

TEST(PlanPipelineToolTest, InterleavedStashIsHalfOfGrouped) {
  PlanPipelineOptions options;
  options.schedule = "Interleaved";  // Case does not matter.
  const std::string report = Report(options);
  EXPECT_THAT(report, HasSubstr("Interleaved training"));
  EXPECT_THAT(report, HasSubstr("3/11"));
  EXPECT_THAT(report, HasSubstr("FIFO depths [3, 2, 1, 0], measured peak "
                                "live [4, 3, 2, 1]"));
}

TEST(PlanPipelineToolTest, LockstepShowsGroupedIsFaster) {
  PlanPipelineOptions options;
  options.gradient_accumulation_count = 16;
  options.timing = "lockstep";
  EXPECT_THAT(Report(options), HasSubstr("makespan 57 s"));
  options.schedule = "interleaved";
  const std::string report = Report(options);
  EXPECT_THAT(report, HasSubstr("makespan 72 s"));
  EXPECT_THAT(report, HasSubstr("not the case here"));  // Theory disclaimer.
}

TEST(PlanPipelineToolTest, SequentialRunsOneStageAtATime) {
  PlanPipelineOptions options;
  options.schedule = "sequential";
  options.gradient_accumulation_count = 2;
  const std::string report = Report(options);
  EXPECT_THAT(report, HasSubstr("lockstep timing"));
  EXPECT_THAT(report, HasSubstr("bubble: 75.0% measured, 75.0% theory "
                                "(N-1)/N = 3/4"));
  EXPECT_THAT(report, HasSubstr("FIFO depths [0, 0, 0, 0]"));
}

TEST(PlanPipelineToolTest, BadGradientAccumulationCountIsRefused) {
  PlanPipelineOptions options;
  options.gradient_accumulation_count = 3;
  absl::StatusOr<std::string> report = RunPlanPipeline(options);
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(report.status().message(),
              HasSubstr("gradient_accumulation_count 3 is smaller than the 4 "
                        "stages (Grouped training)"));
  EXPECT_THAT(report.status().message(), HasSubstr("--force"));
}

TEST(PlanPipelineToolTest, ForcePrintsTheViolationAndPlansAnyway) {
  PlanPipelineOptions options;
  options.gradient_accumulation_count = 2;
  options.force = true;
  const std::string report = Report(options);
  EXPECT_THAT(report, HasSubstr("ValidatePipeline: Invalid pipeline"));
  EXPECT_THAT(report, HasSubstr("is smaller than the 4 stages"));
  EXPECT_THAT(report, HasSubstr("planning it anyway"));
  EXPECT_THAT(report, HasSubstr("bubble: 60.0% measured, 60.0% theory "
                                "(N-1)/(M+N-1) = 3/5"));
}

TEST(PlanPipelineToolTest, PredictsStashMemory) {
  PlanPipelineOptions options;
  options.stash_bytes = "1000,1000,1000,500";
  const std::string report = Report(options);
  // Grouped, 4 stages: peak entries [8, 6, 4, 2].
  EXPECT_THAT(report, HasSubstr("stash memory per IPU (peak entries [8, 6, "
                                "4, 2] x bytes): [8000, 6000, 4000, 1000] B"));
}

TEST(PlanPipelineToolTest, TheTutorialCountRuns) {
  PlanPipelineOptions options;
  options.gradient_accumulation_count = 10;
  const std::string report = Report(options);
  EXPECT_THAT(report, HasSubstr("ValidatePipeline: OK"));
  EXPECT_THAT(report, HasSubstr("bubble: 23.1% measured, 23.1% theory "
                                "(N-1)/(M+N-1) = 3/13"));
}

TEST(PlanPipelineToolTest, AllViolationsAtOnce) {
  PlanPipelineOptions options;
  options.schedule = "interleaved";
  options.device_mapping = "0, 1, 0, 1";
  options.gradient_accumulation_count = 6;
  absl::StatusOr<std::string> report = RunPlanPipeline(options);
  ASSERT_FALSE(report.ok());
  EXPECT_THAT(report.status().message(),
              HasSubstr("Interleaved training cannot run several stages on "
                        "one IPU"));
  EXPECT_THAT(report.status().message(),
              HasSubstr("gradient_accumulation_count 6"));
}

TEST(PlanPipelineToolTest, InferenceIgnoresBackwardCosts) {
  PlanPipelineOptions options;
  options.training = false;
  options.gradient_accumulation_count = 4;  // A multiple of N in inference.
  options.backward_costs = "not used";
  const std::string report = Report(options);
  EXPECT_THAT(report, HasSubstr("Grouped inference"));
  EXPECT_THAT(report, HasSubstr("makespan 7 s"));  // (4 + 3) forwards.
  EXPECT_THAT(report, Not(HasSubstr("backward [")));
}

TEST(PlanPipelineToolTest, ParsesPerStageCostsAndMapping) {
  PlanPipelineOptions options;
  options.stages = 2;
  options.device_mapping = "1,0";
  options.forward_costs = "1.5, 2";
  options.backward_costs = "3";
  absl::StatusOr<PlanPipelineRequest> request =
      ParsePlanPipelineOptions(options);
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(request->schedule, PipelineSchedule::kGrouped);
  EXPECT_EQ(request->timing, PlanTiming::kDataflow);
  EXPECT_THAT(request->device_mapping, ElementsAre(1, 0));
  EXPECT_THAT(request->costs.forward, ElementsAre(1.5, 2));
  EXPECT_THAT(request->costs.backward, ElementsAre(3, 3));
}

TEST(PlanPipelineToolTest, ParseErrorsNameTheFlag) {
  struct Case {
    PlanPipelineOptions options;
    std::string expected;
  };
  std::vector<Case> cases(6);
  cases[0].options.schedule = "zbv";
  cases[0].expected = "--schedule=zbv is not a schedule";
  cases[1].options.timing = "async";
  cases[1].expected = "--timing=async is not a timing model";
  cases[2].options.forward_costs = "1,2,3";
  cases[2].expected = "--forward_costs=1,2,3 has 3 values for 4 stages";
  cases[3].options.backward_costs = "1,,2,2";
  cases[3].expected = "--backward_costs=1,,2,2 has an empty element";
  cases[4].options.device_mapping = "0,1,x,3";
  cases[4].expected = "--device_mapping=0,1,x,3: 'x' is not an IPU index";
  cases[5].options.forward_costs = "fast";
  cases[5].expected = "--forward_costs=fast: 'fast' is not a number";
  for (const Case& c : cases) {
    absl::StatusOr<std::string> report = RunPlanPipeline(c.options);
    ASSERT_FALSE(report.ok()) << c.expected;
    EXPECT_EQ(report.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(report.status().message(), HasSubstr(c.expected));
  }
}

TEST(PlanPipelineToolTest, NegativeCostIsThePlannersError) {
  PlanPipelineOptions options;
  options.forward_costs = "1,-1,1,1";
  absl::StatusOr<std::string> report = RunPlanPipeline(options);
  ASSERT_FALSE(report.ok());
  EXPECT_THAT(report.status().message(),
              HasSubstr("forward cost of stage 1 is -1"));
}

TEST(PlanPipelineToolTest, WritesSvgAndJson) {
  PlanPipelineOptions options;
  options.svg_path = TempPath("plan.svg");
  options.json_path = TempPath("plan.json");
  const std::string report = Report(options);
  EXPECT_THAT(report, HasSubstr("Wrote SVG timeline to " + options.svg_path));
  EXPECT_THAT(report, HasSubstr("Wrote Chrome trace to " + options.json_path));
  const std::string svg = ReadAll(options.svg_path);
  EXPECT_THAT(svg, HasSubstr("<svg"));
  EXPECT_THAT(svg, HasSubstr("Grouped training, 4 stages, M = 8, dataflow "
                             "timing: makespan 33 s, bubble 27.3%"));
  EXPECT_THAT(ReadAll(options.json_path), HasSubstr("\"traceEvents\""));
}

TEST(PlanPipelineToolTest, UnwritablePathNamesTheFlag) {
  PlanPipelineOptions options;
  options.svg_path = TempPath("no/such/dir/plan.svg");
  absl::StatusOr<std::string> report = RunPlanPipeline(options);
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(report.status().message(), HasSubstr("--svg="));
}

}  // namespace
}  // namespace ipuflow::pipelining
