// The examples' results, checked: they are documentation that must not rot.
#include "core/testing/op_test.h"
#include "examples/fashion_mnist_training.h"
#include "examples/perf_training.h"
#include "gtest/gtest.h"

namespace ipuflow::examples {
namespace {

TEST(PerfTrainingExampleTest, CountsAndOutfeedsTenSteps) {
  auto system = IPUSystem::Create(IPUConfig());
  ASSERT_TRUE(system.ok());
  auto result = RunPerfTraining(system->get());
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->counter.scalar<float>(), 10.0f);
  ASSERT_EQ(result->outfeed.names, (std::vector<std::string>{"d1", "d2"}));
  const Tensor& d1 = result->outfeed["d1"];
  const Tensor& d2 = result->outfeed["d2"];
  ASSERT_EQ(d1.shape(), TensorShape({10, 800}));
  ASSERT_EQ(d2.shape(), TensorShape({10, 800}));
  for (int64_t i = 0; i < d1.NumElements(); ++i) {
    ASSERT_EQ(d1.data<float>()[i], 2.0f);
    ASSERT_EQ(d2.data<float>()[i], 0.0f);
  }
}

TEST(TrainFashionMnistExampleTest, ShortRunLearns) {
  auto system = IPUSystem::Create(IPUConfig());
  ASSERT_TRUE(system.ok());
  TrainingOptions options;  // The tutorial ConvNet, batch 40, AdamW 1e-3.
  options.train_limit = 8000;
  options.test_limit = 2000;
  int64_t last_step = 0;
  auto report = TrainFashionMnist(system->get(), options,
                                  [&](int64_t step, int64_t, float, float) {
                                    EXPECT_EQ(step, last_step + 1);
                                    last_step = step;
                                  });
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->steps, 200);
  EXPECT_EQ(last_step, 200);  // The monitor saw every step, in order.
  EXPECT_LT(report->final_loss, 1.0);
  EXPECT_GT(report->test_accuracy, 0.72);
}

TEST(OutfeedMonitorExampleTest, MonitorSeesEveryLossAndItFalls) {
  auto system = IPUSystem::Create(IPUConfig());
  ASSERT_TRUE(system.ok());
  TrainingOptions options;  // What outfeed_monitor runs.
  options.model = "mlp";
  options.batch_size = 32;
  options.device_iterations = 25;
  options.train_limit = 4000;
  options.test_limit = 1000;
  std::vector<float> losses;
  auto report = TrainFashionMnist(
      system->get(), options,
      [&](int64_t, int64_t, float loss, float) { losses.push_back(loss); });
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_EQ(losses.size(), 125u);
  const float first = (losses[0] + losses[1] + losses[2]) / 3;
  const float last = (losses[122] + losses[123] + losses[124]) / 3;
  EXPECT_GT(first, 1.5f);
  EXPECT_LT(last, 0.6f * first);
}

TEST(TrainFashionMnistExampleTest, BadOptionsAreErrors) {
  auto system = IPUSystem::Create(IPUConfig());
  TrainingOptions options;
  options.model = "resnet";
  EXPECT_EQ(TrainFashionMnist(system->get(), options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ipuflow::examples
