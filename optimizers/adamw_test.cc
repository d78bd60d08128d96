#include "optimizers/adamw.h"

#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "optimizers/test_util.h"

namespace ipuflow::optimizers {
namespace {

using ::ipuflow::optimizers::testing::LinearLoss;
using ::ipuflow::optimizers::testing::RunSteps;
using ::ipuflow::testing::TensorNear;

TEST(AdamWTest, MatchesTorchAdamWForTwoSteps) {
  // torch.optim.AdamW(lr=0.1, weight_decay=0.1): w *= 1 - 0.01, then the
  // Adam step (adam_test.cc): grads [0.5, -1] then [1, 1].
  // Step 1: [1, 2] * 0.99 - 0.1 * [1, -1] = [0.89, 2.08].
  // Step 2: [0.89, 2.08] * 0.99 - [0.0965182, 0.0052632]
  //         = [0.7845818, 2.0539368].
  Scope s = Scope::NewRootScope();
  LinearLoss l(s, "w", {1, 2});
  Node* train = AdamWOptimizer(0.1f, 0.1f).Minimize(s, l.loss);
  std::vector<Tensor> w =
      RunSteps(s, train, {l.Feed({0.5f, -1}), l.Feed({1, 1})}, l.w.value);
  ASSERT_EQ(w.size(), 2u);
  EXPECT_TRUE(TensorNear(w[0], {0.89f, 2.08f}, {2}));
  EXPECT_TRUE(TensorNear(w[1], {0.7845818f, 2.0539368f}, {2}));
}

TEST(AdamWTest, DecaysEvenWithoutGradient) {
  // Zero gradient: the Adam step is 0 / (0 + epsilon) = 0; only the decay
  // acts: w *= 1 - 0.1 * 0.5 per step.
  Scope s = Scope::NewRootScope();
  LinearLoss l(s, "w", {1, 2});
  Node* train = AdamWOptimizer(0.1f, 0.5f).Minimize(s, l.loss);
  std::vector<Tensor> w =
      RunSteps(s, train, {l.Feed({0, 0}), l.Feed({0, 0})}, l.w.value);
  ASSERT_EQ(w.size(), 2u);
  EXPECT_TRUE(TensorNear(w[0], {0.95f, 1.9f}, {2}));
  EXPECT_TRUE(TensorNear(w[1], {0.9025f, 1.805f}, {2}));
}

TEST(AdamWTest, DefaultsArePyTorchs) {
  // weight_decay 0.01 and epsilon 1e-8, gradient 1e-6:
  // w = w * (1 - 0.1 * 0.01) - 0.1 * 1e-6 / (1e-6 + 1e-8)
  //   = [0.999 - 0.0990099, 1.998 - 0.0990099].
  Scope s = Scope::NewRootScope();
  LinearLoss l(s, "w", {1, 2});
  AdamWOptimizer adamw(0.1f);
  EXPECT_EQ(adamw.name(), "AdamW");
  Node* train = adamw.Minimize(s, l.loss);
  std::vector<Tensor> w =
      RunSteps(s, train, {l.Feed({1e-6f, 1e-6f})}, l.w.value);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_TRUE(
      TensorNear(w[0], {0.999f - 0.0990099f, 1.998f - 0.0990099f}, {2}));
  EXPECT_NE(s.graph()->FindNode("w/AdamW/m"), nullptr);
}

}  // namespace
}  // namespace ipuflow::optimizers
