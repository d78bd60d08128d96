// The pipelined tutorial (the README's main example) on a shortened run:
// it learns, the monitor sees every micro-batch in order, and the schedule
// and offloading change how it runs, not what it computes.
#include "examples/pipelined_training.h"

#include "gtest/gtest.h"

namespace ipuflow::examples {
namespace {

std::unique_ptr<IPUSystem> FourIpus() {
  IPUConfig config;
  config.set_auto_select_ipus(4);
  return std::move(IPUSystem::Create(config)).value();
}

PipelinedTrainingOptions Short() {
  PipelinedTrainingOptions o;  // The tutorial's settings...
  o.train_limit = 8000;        // ...on 2 host calls of 4000 images
  o.test_limit = 1600;         // and 2 inference calls of 800.
  return o;
}

TEST(PipelinedTutorialTest, ShortRunLearns) {
  auto system = FourIpus();
  int64_t last = 0;
  auto r = TrainPipelinedFashionMnist(system.get(), Short(),
                                      [&](int64_t done, int64_t total, float,
                                          float) {
                                        EXPECT_EQ(done, last + 1);
                                        EXPECT_EQ(total, 200);
                                        last = done;
                                      });
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(last, 200);  // Every micro-batch's loss reached the monitor.
  EXPECT_EQ(r->micro_batches, 200);
  EXPECT_EQ(r->weight_updates, 20);
  EXPECT_EQ(r->test_images, 1600);
  EXPECT_LT(r->final_loss, 1.2);
  EXPECT_GT(r->test_accuracy, 0.6);
  // The last call ran 10 pipeline runs of 10 micro-batches on 4 IPUs.
  EXPECT_EQ(r->last_run.items.size(), 10u * 10 * 4 * 2);
  EXPECT_EQ(r->last_run.table.kind, pipelining::PipelineSchedule::kGrouped);
  EXPECT_NE(r->memory_report.find("IPU 3"), std::string::npos);
}

TEST(PipelinedTutorialTest, ShardedAndOffloadedComputeTheSameModel) {
  PipelinedTrainingOptions o = Short();
  o.train_limit = 4000;
  o.device_iterations = 2;
  auto a = TrainPipelinedFashionMnist(FourIpus().get(), o);
  o.strategy = "sharded";
  o.offload_optimiser = true;
  auto b = TrainPipelinedFashionMnist(FourIpus().get(), o);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->last_run.table.kind, pipelining::PipelineSchedule::kSequential);
  // Same micro-batches, same accumulation order: the same weights, so the
  // same test accuracy, to the last image.
  EXPECT_EQ(a->test_accuracy, b->test_accuracy);
  EXPECT_EQ(a->final_loss, b->final_loss);
  EXPECT_GT(b->last_run.offloaded_bytes_streamed, 0);
  EXPECT_NE(b->memory_report.find("remote memory"), std::string::npos);
}

TEST(PipelinedTutorialTest, BadOptionsAreErrors) {
  PipelinedTrainingOptions o;
  o.strategy = "phased";
  EXPECT_EQ(TrainPipelinedFashionMnist(FourIpus().get(), o).status().code(),
            absl::StatusCode::kInvalidArgument);
  IPUConfig two;
  two.set_auto_select_ipus(2);
  auto system = IPUSystem::Create(two);
  EXPECT_EQ(TrainPipelinedFashionMnist(system->get(), Short()).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace ipuflow::examples
