#include "optimizers/gradient_descent.h"

#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "optimizers/test_util.h"

namespace ipuflow::optimizers {
namespace {

using ::ipuflow::optimizers::testing::LinearLoss;
using ::ipuflow::optimizers::testing::RunSteps;
using ::ipuflow::testing::TensorNear;

TEST(GradientDescentTest, OneAndTwoSteps) {
  // w = [1, 2], lr = 0.1; grads [0.5, -1] then [2, 3]:
  // [1 - 0.05, 2 + 0.1] = [0.95, 2.1];  [0.95 - 0.2, 2.1 - 0.3] = [0.75, 1.8].
  Scope s = Scope::NewRootScope();
  LinearLoss l(s, "w", {1, 2});
  Node* train = GradientDescentOptimizer(0.1f).Minimize(s, l.loss);
  std::vector<Tensor> w =
      RunSteps(s, train, {l.Feed({0.5f, -1}), l.Feed({2, 3})}, l.w.value);
  ASSERT_EQ(w.size(), 2u);
  EXPECT_TRUE(TensorNear(w[0], {0.95f, 2.1f}, {2}));
  EXPECT_TRUE(TensorNear(w[1], {0.75f, 1.8f}, {2}));
}

TEST(GradientDescentTest, BuildsOneFusedUpdatePerVariable) {
  Scope s = Scope::NewRootScope();
  LinearLoss l(s, "w", {1, 2});
  Node* train = GradientDescentOptimizer(0.1f).Minimize(s, l.loss);
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(train->control_inputs().size(), 1u);
  const Node* update = train->control_inputs()[0];
  EXPECT_EQ(update->op(), "ApplyGradientDescent");
  EXPECT_EQ(update->name(), "GradientDescent/update_w");
  EXPECT_EQ(update->input(0).node, l.w.handle.node);
  // No slots.
  EXPECT_EQ(s.graph()->collection("variables").size(), 1u);
}

}  // namespace
}  // namespace ipuflow::optimizers
