// Every violation Pipeline::Create() checks, reported before anything runs, all
// at once, each naming the values at fault.
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/math/add.h"
#include "ops/math/mat_mul.h"
#include "ops/math/reduce_mean.h"
#include "ops/state/read_variable.h"
#include "ops/state/variable.h"
#include "optimizers/gradient_accumulation.h"
#include "optimizers/gradient_descent.h"
#include "pipelining/pipeline.h"
#include "pipelining/pipeline_test_model.h"

namespace ipuflow::pipelining {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

std::vector<Output> PassThrough(const Scope& s, const std::vector<Output>& a) {
  return {ops::Add(s, a[0], ops::Const(s, 1.0f)), a[1]};
}

// A valid two-stage inference pipeline to break one knob at a time.
struct Fixture {
  Scope scope = Scope::NewRootScope();
  std::unique_ptr<feeds::IPUInfeedQueue> infeed =
      *feeds::IPUInfeedQueue::Create(testing::MicroBatches(8));
  std::unique_ptr<feeds::IPUOutfeedQueue> outfeed =
      *feeds::IPUOutfeedQueue::Create();
  PipelineOptions options;

  Fixture() {
    options.computational_stages = {PassThrough, PassThrough};
    options.gradient_accumulation_count = 4;
    options.infeed_queue = infeed.get();
    options.outfeed_queue = outfeed.get();
  }
  absl::Status Build() { return Pipeline::Create(scope, options).status(); }
};

OptimizerFunction Sgd() {
  return [](const Scope& s, const std::vector<Output>& out) {
    return OptimizerFunctionOutput{
        std::make_shared<optimizers::GradientDescentOptimizer>(0.1f),
        ops::ReduceMean(s, out[0])};
  };
}

TEST(PipelineValidationTest, ValidPipelineBuilds) {
  Fixture f;
  EXPECT_TRUE(f.Build().ok()) << f.Build();
}

TEST(PipelineValidationTest, FewerThanTwoStages) {
  Fixture f;
  f.options.computational_stages = {PassThrough};
  absl::Status s = f.Build();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("at least two stages, got 1"));
}

TEST(PipelineValidationTest, MappingLengthDiffers) {
  Fixture f;
  f.options.device_mapping = {0, 1, 2};
  EXPECT_THAT(f.Build().message(),
              HasSubstr("device_mapping [0, 1, 2] has 3 entries for 2 stages"));
}

TEST(PipelineValidationTest, ConcurrentMappingDiffers) {
  Fixture f;
  f.options.computational_stages = {PassThrough, {PassThrough, PassThrough}};
  f.options.device_mapping = {0, 1};
  EXPECT_THAT(f.Build().message(),
              HasSubstr("stage 1 has 2 concurrent function(s) but "
                        "device_mapping[1] lists 1 IPU(s)"));
}

TEST(PipelineValidationTest, AllViolationsAtOnce) {
  Fixture f;
  f.options.computational_stages = {PassThrough, PassThrough, PassThrough};
  f.options.gradient_accumulation_count = 2;  // Fewer than the stages.
  f.options.optimizer_function = Sgd();
  f.options.repeat_count = 0;
  f.options.gradient_accumulation_dtype = DType::kInt32;
  absl::Status s = f.Build();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(),
              AllOf(HasSubstr("Invalid pipeline (Grouped training, 3 stages"),
                    HasSubstr("gradient_accumulation_count 2 is smaller "
                              "than the 3 stages"),
                    HasSubstr("repeat_count must be >= 1, got 0"),
                    HasSubstr("gradient_accumulation_dtype must be float32 or "
                              "float16, got int32")));
}

TEST(PipelineValidationTest, InterleavedTrainingWithTwoStagesOnOneIpu) {
  Fixture f;
  f.options.pipeline_schedule = PipelineSchedule::kInterleaved;
  f.options.optimizer_function = Sgd();
  f.options.device_mapping = {0, 0};
  EXPECT_THAT(f.Build().message(), HasSubstr("Interleaved"));
  EXPECT_THAT(f.Build().message(), HasSubstr("IPU 0"));
}

TEST(PipelineValidationTest, StageInputCountMismatch) {
  Fixture f;
  f.options.computational_stages = {PassThrough, StageFunction(PassThrough, 3)};
  EXPECT_THAT(f.Build().message(),
              HasSubstr("stage 1 takes 3 input(s) but receives 2 "
                        "(float32[4,6], int32[4]: the previous stage's "
                        "outputs)"));
}

TEST(PipelineValidationTest, CapturedNonVariable) {
  Fixture f;
  Output outside = ops::Const(f.scope.WithOpName("outside"), 2.0f);
  f.options.computational_stages = {
      PassThrough, [&](const Scope& s, const std::vector<Output>& a) {
        return std::vector<Output>{ops::Add(s, a[0], outside), a[1]};
      }};
  EXPECT_THAT(
      f.Build().message(),
      AllOf(HasSubstr("stage 1 captures 'outside' (Const)"),
            HasSubstr("not a variable"), HasSubstr("inputs or infeed_queue")));
}

TEST(PipelineValidationTest, VariableOnAnotherIpu) {
  Fixture f;
  ops::VariableHandle w = ops::Variable(
      f.scope.WithIpu(0).WithOpName("w"),
      ops::Const(f.scope, Tensor::Filled(DType::kFloat32, {6, 6}, 1)));
  f.options.computational_stages = {
      PassThrough, [&](const Scope& s, const std::vector<Output>& a) {
        Output y = ops::MatMul(s, a[0], ops::ReadVariable(s, w.handle));
        return std::vector<Output>{y, a[1]};
      }};
  EXPECT_THAT(f.Build().message(),
              HasSubstr("stage 1 (IPU 1) uses variable 'w' placed on IPU 0"));
}

TEST(PipelineValidationTest, GradientAccumulationOptimizerRejected) {
  Fixture f;
  auto inner = std::make_shared<optimizers::GradientDescentOptimizer>(0.1f);
  f.options.gradient_accumulation_count = 4;
  f.options.optimizer_function = [&](const Scope& s,
                                     const std::vector<Output>& out) {
    return OptimizerFunctionOutput{
        std::make_shared<optimizers::GradientAccumulationOptimizer>(inner.get(),
                                                                    4),
        ops::ReduceMean(s, out[0])};
  };
  EXPECT_THAT(f.Build().message(),
              AllOf(HasSubstr("gradient-accumulation optimizer"),
                    HasSubstr("pass the inner optimizer")));
}

TEST(PipelineValidationTest, InferenceOutputsWithoutOutfeed) {
  Fixture f;
  f.options.outfeed_queue = nullptr;
  EXPECT_THAT(f.Build().message(),
              AllOf(HasSubstr("the last computational stage has tensor "
                              "outputs"),
                    HasSubstr("no outfeed_queue has been provided")));
}

TEST(PipelineValidationTest, OutfeedLossNeedsAnOptimizer) {
  Fixture f;
  f.options.outfeed_loss = true;
  EXPECT_THAT(f.Build().message(),
              HasSubstr("outfeed_loss requires an optimizer_function"));
}

// Issue 22: every field of PipelineOptions through 0, -1, its largest
// value and a product that overflows; each is InvalidArgument naming the
// field and the value, before anything is built or run.
TEST(PipelineValidationTest, EveryFieldsWholeRange) {
  constexpr int kIntMax = std::numeric_limits<int>::max();
  struct Case {
    std::function<void(PipelineOptions&)> set;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {[](PipelineOptions& o) { o.gradient_accumulation_count = 0; },
       "gradient_accumulation_count 0 is smaller than the 2 stages"},
      {[](PipelineOptions& o) { o.gradient_accumulation_count = -1; },
       "gradient_accumulation_count -1 is smaller than the 2 stages"},
      {[](PipelineOptions& o) { o.gradient_accumulation_count = kIntMax; },
       "gradient_accumulation_count is 2147483647; it must be between 2 and "
       "16777216"},
      {[](PipelineOptions& o) {
         o.gradient_accumulation_count = (1 << 29) + 1;
       },
       "gradient_accumulation_count is 536870913"},
      {[](PipelineOptions& o) { o.repeat_count = 0; },
       "repeat_count must be >= 1, got 0"},
      {[](PipelineOptions& o) { o.repeat_count = -1; },
       "repeat_count must be >= 1, got -1"},
      {[](PipelineOptions& o) { o.repeat_count = kIntMax; },
       "repeat_count x gradient_accumulation_count = 2147483647 x 4 = "
       "8589934588; the limit is 2147483647 micro-batches in one run"},
      {[](PipelineOptions& o) {
         o.pipeline_schedule = static_cast<PipelineSchedule>(9);
       },
       "pipeline_schedule is 9, not a PipelineSchedule"},
      {[](PipelineOptions& o) {
         o.pipeline_schedule = static_cast<PipelineSchedule>(-1);
       },
       "pipeline_schedule is -1, not a PipelineSchedule"},
      {[](PipelineOptions& o) {
         o.recomputation_mode = static_cast<RecomputationMode>(7);
       },
       "recomputation_mode is 7, not a RecomputationMode (0 Auto, 1 "
       "RecomputeThenBackpropagate, 2 RecomputeAndBackpropagateInterleaved)"},
      {[](PipelineOptions& o) {
         o.reduction_method = static_cast<ReductionMethod>(-1);
       },
       "reduction_method is -1, not a ReductionMethod"},
      {[](PipelineOptions& o) {
         o.device_mapping = {0, -1};
       },
       "device_mapping[1] = -1 is not an IPU index"},
      {[](PipelineOptions& o) {
         o.device_mapping = {0, kIntMax};
       },
       "device_mapping[1] = 2147483647 is not an IPU index (it must be "
       "between 0 and 1023)"},
      {[](PipelineOptions& o) {
         o.accumulate_outfeed = true;
         o.outfeed_queue = nullptr;
       },
       "accumulate_outfeed requires an outfeed_queue"},
  };
  for (const Case& c : cases) {
    Fixture f;
    c.set(f.options);
    const absl::Status s = f.Build();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.expected;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.expected));
  }
}

TEST(PipelineValidationTest, RecomputationModeTheScheduleCannotRun) {
  Fixture f;
  f.options.pipeline_schedule = PipelineSchedule::kSequential;
  f.options.recomputation_mode = RecomputationMode::kRecomputeThenBackpropagate;
  EXPECT_THAT(f.Build().message(),
              HasSubstr("'Sequential' does not support the "
                        "'RecomputeThenBackpropagate' recomputation mode"));
}

TEST(PipelineValidationTest, ConcurrentLastStageInTraining) {
  Fixture f;
  f.options.computational_stages = {PassThrough, {PassThrough, PassThrough}};
  f.options.device_mapping = {0, {1, 2}};
  f.options.gradient_accumulation_count = 4;
  f.options.optimizer_function = Sgd();
  EXPECT_THAT(f.Build().message(),
              HasSubstr("last stage of a training pipeline cannot be a list"));
}

TEST(PipelineValidationTest, StageShapeErrorNamesTheStage) {
  Fixture f;
  f.options.computational_stages = {
      PassThrough, [](const Scope& s, const std::vector<Output>& a) {
        // [4,6] x [4,6]: inner dimensions differ.
        return std::vector<Output>{ops::MatMul(s, a[0], a[0]), a[1]};
      }};
  absl::Status s = f.Build();
  EXPECT_THAT(s.message(), AllOf(HasSubstr("stage 1 (IPU 1) failed to build"),
                                 HasSubstr("MatMul")));
}

}  // namespace
}  // namespace ipuflow::pipelining
