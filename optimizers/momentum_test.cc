#include "optimizers/momentum.h"

#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/state/read_variable.h"
#include "optimizers/test_util.h"

namespace ipuflow::optimizers {
namespace {

using ::ipuflow::optimizers::testing::LinearLoss;
using ::ipuflow::optimizers::testing::RunSteps;
using ::ipuflow::testing::TensorNear;

// Two steps from w = [1, 2] with lr 0.1, momentum 0.9, gradient [1, -2].
std::vector<Tensor> TwoSteps(bool nesterov) {
  Scope s = Scope::NewRootScope();
  LinearLoss l(s, "w", {1, 2});
  Node* train = MomentumOptimizer(0.1f, 0.9f, nesterov).Minimize(s, l.loss);
  return RunSteps(s, train, {l.Feed({1, -2}), l.Feed({1, -2})}, l.w.value);
}

TEST(MomentumTest, PlainTwoSteps) {
  // accum = [1, -2]:  w = [1, 2] - 0.1 * [1, -2] = [0.9, 2.2]
  // accum = 0.9 * [1, -2] + [1, -2] = [1.9, -3.8]:  w = [0.71, 2.58]
  std::vector<Tensor> w = TwoSteps(false);
  ASSERT_EQ(w.size(), 2u);
  EXPECT_TRUE(TensorNear(w[0], {0.9f, 2.2f}, {2}));
  EXPECT_TRUE(TensorNear(w[1], {0.71f, 2.58f}, {2}));
}

TEST(MomentumTest, NesterovLooksAhead) {
  // w -= lr * (grad + momentum * accum), accum as above:
  // w = [1, 2] - 0.1 * [1.9, -3.8] = [0.81, 2.38]
  // w = [0.81, 2.38] - 0.1 * ([1, -2] + 0.9 * [1.9, -3.8]) = [0.539, 2.922]
  std::vector<Tensor> w = TwoSteps(true);
  ASSERT_EQ(w.size(), 2u);
  EXPECT_TRUE(TensorNear(w[0], {0.81f, 2.38f}, {2}));
  EXPECT_TRUE(TensorNear(w[1], {0.539f, 2.922f}, {2}));
}

TEST(MomentumTest, SlotIsANonTrainableZeroInitialisedVariable) {
  Scope s = Scope::NewRootScope();
  LinearLoss l(s, "w", {1, 2});
  Node* train = MomentumOptimizer(0.1f, 0.9f).Minimize(s, l.loss);
  ASSERT_TRUE(s.ok()) << s.status();
  const Graph& g = *s.graph();
  Node* accum = g.FindNode("w/Momentum/accum");
  ASSERT_NE(accum, nullptr);
  EXPECT_EQ(accum->op(), "Variable");
  EXPECT_EQ(g.collection("variables").size(), 2u);
  EXPECT_EQ(g.collection("trainable_variables").size(), 1u);
  EXPECT_EQ(g.collection("initializers").size(), 2u);
  std::vector<Tensor> a = RunSteps(s, train, {l.Feed({1, -2})},
                                   ops::ReadVariable(s, Output(accum)));
  ASSERT_EQ(a.size(), 1u);
  EXPECT_TRUE(TensorNear(a[0], {1, -2}, {2}));  // 0.9 * 0 + grad.
}

TEST(MomentumTest, MomentumAsATensor) {
  Scope s = Scope::NewRootScope();
  LinearLoss l(s, "w", {1, 2});
  Output mu = ops::Placeholder(s, DType::kFloat32, {});
  Node* train = MomentumOptimizer(0.1f, mu).Minimize(s, l.loss);
  FeedList f = l.Feed({1, -2});
  f.push_back({mu, Tensor::Scalar<float>(0.5f)});
  // accum = [1, -2], then 0.5 * [1, -2] + [1, -2] = [1.5, -3]:
  // w = [0.9, 2.2], then [0.9 - 0.15, 2.2 + 0.3] = [0.75, 2.5].
  std::vector<Tensor> w = RunSteps(s, train, {f, f}, l.w.value);
  ASSERT_EQ(w.size(), 2u);
  EXPECT_TRUE(TensorNear(w[1], {0.75f, 2.5f}, {2}));
}

}  // namespace
}  // namespace ipuflow::optimizers
