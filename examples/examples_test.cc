// The examples' results, checked: they are documentation that must not rot.
#include "core/testing/op_test.h"
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

}  // namespace
}  // namespace ipuflow::examples
