// Master weights (optimizer.h): float16 variables updated through float32
// copies.
#include <cmath>

#include "core/half.h"
#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "ops/state/read_variable.h"
#include "optimizers/adam.h"
#include "optimizers/gradient_accumulation.h"
#include "optimizers/gradient_descent.h"
#include "optimizers/test_util.h"

namespace ipuflow::optimizers {
namespace {

using ::ipuflow::optimizers::testing::At;

using ::ipuflow::optimizers::testing::LinearLoss;
using ::ipuflow::optimizers::testing::RunSteps;

// 100 SGD steps of lr * c = 1e-4 on w = [1, -0.5] (float16). In float16 the
// spacing near 1 is 2^-11 below and 2^-10 above, so 1 - 1e-4 rounds back to
// 1: every update vanishes. The float32 master accumulates them: 1 - 0.01.
std::vector<Tensor> TinyUpdates(Optimizer& opt, int steps) {
  Scope s = Scope::NewRootScope();
  LinearLoss l(s, "w", {1, -0.5f}, DType::kFloat16);
  Node* train = opt.Minimize(s, l.loss);
  std::vector<FeedList> feeds(steps, l.Feed({1e-4f, -1e-4f}));
  return RunSteps(s, train, feeds, l.w.value);
}

TEST(MasterWeightsTest, TinyUpdatesVanishInFloat16Alone) {
  GradientDescentOptimizer sgd(1.f);
  const std::vector<Tensor> w = TinyUpdates(sgd, 100);
  ASSERT_EQ(w.size(), 100u);
  EXPECT_EQ(At(w.back(), 0), 1.f);
  EXPECT_EQ(At(w.back(), 1), -0.5f);
}

TEST(MasterWeightsTest, TinyUpdatesAccumulateInTheMaster) {
  GradientDescentOptimizer sgd(1.f);
  sgd.set_master_weights(true);
  const std::vector<Tensor> w = TinyUpdates(sgd, 100);
  ASSERT_EQ(w.size(), 100u);
  EXPECT_EQ(w.back().dtype(), DType::kFloat16);
  // The float32 path: 1 - 100e-4 = 0.99 and -0.5 + 0.01 = -0.49, each then
  // rounded to float16 (spacing 2^-11 and 2^-12 there).
  EXPECT_NEAR(At(w.back(), 0), 0.99f, std::ldexp(1.f, -11));
  EXPECT_NEAR(At(w.back(), 1), -0.49f, std::ldexp(1.f, -12));
}

TEST(MasterWeightsTest, MasterAndSlotsAreFloat32Variables) {
  Scope s = Scope::NewRootScope();
  LinearLoss l(s, "w", {1, 2}, DType::kFloat16);
  AdamOptimizer adam(1e-3f);
  adam.set_master_weights(true);
  ASSERT_NE(adam.Minimize(s, l.loss), nullptr) << s.status();
  for (const char* name : {"w/Adam/master", "w/Adam/m", "w/Adam/v"}) {
    Node* n = s.graph()->FindNode(name);
    ASSERT_NE(n, nullptr) << name;
    EXPECT_EQ(n->attr<DType>("dtype"), DType::kFloat32) << name;
  }
  // The master starts at the variable's initial value.
  Output master =
      ops::ReadVariable(s, Output(s.graph()->FindNode("w/Adam/master")));
  Tensor m = ::ipuflow::testing::RunOne(s, {}, master);
  EXPECT_EQ(At(m, 0), 1.f);
  EXPECT_EQ(At(m, 1), 2.f);
}

TEST(MasterWeightsTest, Float32VariablesAreUntouched) {
  Scope s = Scope::NewRootScope();
  LinearLoss l(s, "w", {1, 2});
  GradientDescentOptimizer sgd(0.5f);
  sgd.set_master_weights(true);
  ASSERT_NE(sgd.Minimize(s, l.loss), nullptr) << s.status();
  EXPECT_EQ(s.graph()->FindNode("w/GradientDescent/master"), nullptr);
}

TEST(MasterWeightsTest, ComposesWithFloat32GradientAccumulation) {
  // 4 mini-batches of 1e-4 accumulated in float32 (kSum), applied through the
  // master every 4th step: 25 updates of 4e-4 = 0.01 in all.
  GradientDescentOptimizer sgd(1.f);
  sgd.set_master_weights(true);
  GradientAccumulationOptimizer ga(
      &sgd, 4, GradientAccumulationReductionMethod::kSum, DType::kFloat32);
  const std::vector<Tensor> w = TinyUpdates(ga, 100);
  ASSERT_EQ(w.size(), 100u);
  EXPECT_NEAR(At(w.back(), 0), 0.99f, std::ldexp(1.f, -11));
  EXPECT_NEAR(At(w.back(), 1), -0.49f, std::ldexp(1.f, -12));
}

}  // namespace
}  // namespace ipuflow::optimizers
