// Randomised stress, fast enough for every CI run (~2 s): pipelined runs
// with random schedules, micro-batch counts and recomputation, each checked
// against the unpipelined reference; runs cut short by an exhausted infeed
// or by cancelling the system at random moments return an error, never hang.
#include <memory>
#include <random>
#include <thread>

#include "core/ipu/ipu_strategy.h"
#include "gtest/gtest.h"
#include "ops/nn/sparse_softmax_cross_entropy_with_logits.h"
#include "optimizers/gradient_descent.h"
#include "pipelining/pipeline.h"
#include "pipelining/pipeline_test_model.h"

namespace ipuflow::pipelining {
namespace {

struct Case {
  PipelineSchedule kind;
  int m;
  int runs;
  bool recompute;
};

std::unique_ptr<Pipeline> Build(const Scope& scope, const Case& c,
                                feeds::IPUInfeedQueue* infeed,
                                const std::map<std::string, Tensor>& init) {
  PipelineOptions o;
  o.computational_stages = testing::ModelStages(init);
  o.gradient_accumulation_count = c.m;
  o.repeat_count = c.runs;
  o.infeed_queue = infeed;
  o.pipeline_schedule = c.kind;
  o.optimizer_function = testing::SgdCrossEntropy(0.3f);
  return std::move(Pipeline::Create(scope, o)).value();
}

TEST(PipelineStressTest, RandomConfigurationsMatchTheReference) {
  std::mt19937 rng(1234);
  const auto init = testing::InitialValues(1);
  const PipelineSchedule kinds[] = {PipelineSchedule::kGrouped,
                                    PipelineSchedule::kInterleaved,
                                    PipelineSchedule::kSequential};
  for (int iter = 0; iter < 60; ++iter) {
    Case c{kinds[rng() % 3], 4 + static_cast<int>(rng() % 9),
           1 + static_cast<int>(rng() % 3), rng() % 2 == 0};
    auto system = testing::MakeSystem(4, c.recompute);
    IPUStrategy strategy(system.get());
    Scope scope = Scope::NewRootScope();
    auto infeed = *feeds::IPUInfeedQueue::Create(
        testing::MicroBatches(c.m * c.runs), 1 + rng() % 4);
    auto pipeline = Build(scope, c, infeed.get(), init);
    ASSERT_TRUE(strategy.Initialize(*scope.graph()).ok());
    auto r = testing::RunPipeline(strategy, *pipeline);
    ASSERT_TRUE(r.ok()) << r.status();
    auto ref = testing::TrainReference(init, c.m, c.runs, false, [] {
      return std::make_shared<optimizers::GradientDescentOptimizer>(0.3f);
    });
    EXPECT_LT(testing::MaxDifference(
                  testing::ReadPipelineVariables(system.get(), 4), ref),
              5e-6)
        << PipelineScheduleName(c.kind) << " M=" << c.m << " runs=" << c.runs;
  }
}

TEST(PipelineStressTest, InterruptedRunsReturnErrorsAndNeverHang) {
  std::mt19937 rng(99);
  const auto init = testing::InitialValues(1);
  for (int iter = 0; iter < 100; ++iter) {
    Case c{
        iter % 2 ? PipelineSchedule::kGrouped : PipelineSchedule::kInterleaved,
        8, 4, false};
    auto system = testing::MakeSystem(4);
    IPUStrategy strategy(system.get());
    Scope scope = Scope::NewRootScope();
    const bool short_infeed = rng() % 2 == 0;
    const int elements = short_infeed ? static_cast<int>(rng() % 31) : 32;
    auto infeed = *feeds::IPUInfeedQueue::Create(
        testing::MicroBatches(std::max(1, elements)));
    auto pipeline = Build(scope, c, infeed.get(), init);
    ASSERT_TRUE(strategy.Initialize(*scope.graph()).ok());
    std::thread canceller;
    if (!short_infeed) {
      const int delay_us = static_cast<int>(rng() % 3000);
      canceller = std::thread([&system, delay_us] {
        std::this_thread::sleep_for(std::chrono::microseconds(delay_us));
        system->cancellation()->StartCancel(absl::CancelledError("stop"));
      });
    }
    auto r = testing::RunPipeline(strategy, *pipeline);
    if (canceller.joinable()) canceller.join();
    if (short_infeed) {
      EXPECT_EQ(r.status().code(), absl::StatusCode::kOutOfRange) << r.status();
    } else if (!r.ok()) {
      EXPECT_EQ(r.status().code(), absl::StatusCode::kCancelled) << r.status();
    }
  }
}

}  // namespace
}  // namespace ipuflow::pipelining
