#include "optimizers/lamb.h"

#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "optimizers/test_util.h"

namespace ipuflow::optimizers {
namespace {

using ::ipuflow::optimizers::testing::LinearLoss;
using ::ipuflow::optimizers::testing::RunSteps;
using ::ipuflow::testing::TensorNear;

TEST(LambTest, OneAndTwoSteps) {
  // w = [3, 4], lr 0.1; grads [0.5, -1] then [1, 1].
  // Step 1: r = [1, -1], trust = 5 / sqrt(2): w = [2.6464468, 4.3535536].
  // Step 2: r = [0.7631579 / 0.7906890, 0.0526316 / 1.000001]
  //           = [0.9651811, 0.0526315];  ||w|| = 5.0948101,
  //   ||r|| = 0.9666150: w -= 0.1 * 5.2707743 * r = [2.1377214, 4.3258127].
  Scope s = Scope::NewRootScope();
  LinearLoss l(s, "w", {3, 4});
  Node* train = LambOptimizer(0.1f).Minimize(s, l.loss);
  std::vector<Tensor> w =
      RunSteps(s, train, {l.Feed({0.5f, -1}), l.Feed({1, 1})}, l.w.value);
  ASSERT_EQ(w.size(), 2u);
  EXPECT_TRUE(TensorNear(w[0], {2.6464468f, 4.3535536f}, {2}));
  EXPECT_TRUE(TensorNear(w[1], {2.1377214f, 4.3258127f}, {2}));
  EXPECT_NE(s.graph()->FindNode("w/Lamb/v"), nullptr);
}

}  // namespace
}  // namespace ipuflow::optimizers
