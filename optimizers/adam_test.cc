#include "optimizers/adam.h"

#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "ops/state/read_variable.h"
#include "optimizers/test_util.h"

namespace ipuflow::optimizers {
namespace {

using ::ipuflow::optimizers::testing::LinearLoss;
using ::ipuflow::optimizers::testing::RunSteps;
using ::ipuflow::testing::TensorNear;

TEST(AdamTest, OneAndTwoSteps) {
  // lr 0.1, beta1 0.9, beta2 0.999; grads [0.5, -1] then [1, 1].
  // Step 1: m_hat = g, v_hat = g^2: w -= 0.1 * g / |g| -> [0.9, 2.1].
  // Step 2: m = [0.145, 0.01], v = [0.00124975, 0.001999];
  //   m_hat = m / 0.19 = [0.7631579, 0.0526316];
  //   sqrt(v_hat) = sqrt(v / 0.001999) = [0.7906880, 1];
  //   w -= 0.1 * [0.9651820, 0.0526316] -> [0.8034818, 2.0947368].
  // (epsilon 1e-7 changes these by < 1e-7 relative.)
  Scope s = Scope::NewRootScope();
  LinearLoss l(s, "w", {1, 2});
  Node* train = AdamOptimizer(0.1f).Minimize(s, l.loss);
  std::vector<Tensor> w =
      RunSteps(s, train, {l.Feed({0.5f, -1}), l.Feed({1, 1})}, l.w.value);
  ASSERT_EQ(w.size(), 2u);
  EXPECT_TRUE(TensorNear(w[0], {0.9f, 2.1f}, {2}));
  EXPECT_TRUE(TensorNear(w[1], {0.8034818f, 2.0947368f}, {2}));
}

TEST(AdamTest, DefaultEpsilonIsTensorFlows) {
  // A gradient of 1e-6: step 1 is lr * 1e-6 / (1e-6 + epsilon); with
  // epsilon = 1e-7, 0.1 / 1.1 = 0.0909091 (1e-8 would give 0.0990099).
  Scope s = Scope::NewRootScope();
  LinearLoss l(s, "w", {1, 2});
  Node* train = AdamOptimizer(0.1f).Minimize(s, l.loss);
  std::vector<Tensor> w =
      RunSteps(s, train, {l.Feed({1e-6f, 1e-6f})}, l.w.value);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_TRUE(TensorNear(w[0], {1 - 0.0909091f, 2 - 0.0909091f}, {2}));
}

TEST(AdamTest, SlotsAndStepCounter) {
  Scope s = Scope::NewRootScope();
  LinearLoss l(s, "w", {1, 2});
  Node* train = AdamOptimizer(0.1f).Minimize(s, l.loss);
  ASSERT_TRUE(s.ok()) << s.status();
  const Graph& g = *s.graph();
  Node* m = g.FindNode("w/Adam/m");
  Node* v = g.FindNode("w/Adam/v");
  Node* step = g.FindNode("Adam/step");
  ASSERT_TRUE(m != nullptr && v != nullptr && step != nullptr);
  // w, m, v and the step; only w is trainable.
  EXPECT_EQ(g.collection("variables").size(), 4u);
  EXPECT_EQ(g.collection("trainable_variables").size(), 1u);
  EXPECT_EQ(g.collection("initializers").size(), 4u);
  Output m_value = ops::ReadVariable(s, Output(m));
  Output t = ops::ReadVariable(s, Output(step));
  std::vector<Tensor> ms =
      RunSteps(s, train, {l.Feed({0.5f, -1}), l.Feed({1, 1})}, m_value);
  ASSERT_EQ(ms.size(), 2u);
  EXPECT_TRUE(TensorNear(ms[1], {0.145f, 0.01f}, {2}));
  std::vector<Tensor> ts =
      RunSteps(s, train, {l.Feed({1, 1}), l.Feed({1, 1})}, t);
  ASSERT_EQ(ts.size(), 2u);
  EXPECT_TRUE(TensorNear(ts[0], {1}, {}));
  EXPECT_TRUE(TensorNear(ts[1], {2}, {}));
}

}  // namespace
}  // namespace ipuflow::optimizers
