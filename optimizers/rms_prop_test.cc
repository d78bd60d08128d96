#include "optimizers/rms_prop.h"

#include <cmath>

#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "optimizers/test_util.h"

namespace ipuflow::optimizers {
namespace {

using ::ipuflow::optimizers::testing::LinearLoss;
using ::ipuflow::optimizers::testing::RunSteps;
using ::ipuflow::testing::TensorNear;

// Two steps from w = [1, 2] with gradient [1, -2] (loss = sum(w * c)).
std::vector<Tensor> TwoSteps(Optimizer& opt, DType dtype = DType::kFloat32) {
  Scope s = Scope::NewRootScope();
  LinearLoss l(s, "w", {1, 2}, dtype);
  Node* train = opt.Minimize(s, l.loss);
  return RunSteps(s, train, {l.Feed({1, -2}), l.Feed({1, -2})}, l.w.value);
}

float F(double v) { return static_cast<float>(v); }

TEST(RMSPropTest, TwoStepsByHand) {
  // ms = 0.1 g^2 = [0.1, 0.4];  mom = 0.1 g / sqrt(ms)
  const double m1a = 0.1 / std::sqrt(0.1), m1b = -0.2 / std::sqrt(0.4);
  // ms = 0.9 ms + 0.1 g^2 = [0.19, 0.76]
  const double m2a = 0.1 / std::sqrt(0.19), m2b = -0.2 / std::sqrt(0.76);
  RMSPropOptimizer plain(0.1f, 0.9f, 0.0f, /*epsilon=*/0.0f);
  std::vector<Tensor> w = TwoSteps(plain);
  ASSERT_EQ(w.size(), 2u);
  EXPECT_TRUE(TensorNear(w[0], {F(1 - m1a), F(2 - m1b)}, {2}));
  EXPECT_TRUE(TensorNear(w[1], {F(1 - m1a - m2a), F(2 - m1b - m2b)}, {2}));
  // momentum 0.5: mom = 0.5 mom + the new term.
  RMSPropOptimizer with_momentum(0.1f, 0.9f, 0.5f, 0.0f);
  w = TwoSteps(with_momentum);
  ASSERT_EQ(w.size(), 2u);
  EXPECT_TRUE(TensorNear(
      w[1], {F(1 - m1a - (0.5 * m1a + m2a)), F(2 - m1b - (0.5 * m1b + m2b))},
      {2}));
}

TEST(RMSPropTest, SlotsAndFloat16) {
  Scope s = Scope::NewRootScope();
  LinearLoss l(s, "w", {1, 2});
  RMSPropOptimizer opt(0.1f);
  opt.Minimize(s, l.loss);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_NE(s.graph()->FindNode("w/RMSProp/rms"), nullptr);
  EXPECT_NE(s.graph()->FindNode("w/RMSProp/momentum"), nullptr);
  RMSPropOptimizer a(0.1f), b(0.1f);
  std::vector<Tensor> w32 = TwoSteps(a), w16 = TwoSteps(b, DType::kFloat16);
  ASSERT_EQ(w16.size(), 2u);
  EXPECT_EQ(w16[1].dtype(), DType::kFloat16);
}

TEST(AdagradTest, TwoStepsByHand) {
  // acc = [1, 4], then [2, 8]; delta = 0.1 g / sqrt(acc + 0.1).
  const double d1a = 0.1 / std::sqrt(1.1), d1b = -0.2 / std::sqrt(4.1);
  const double d2a = 0.1 / std::sqrt(2.1), d2b = -0.2 / std::sqrt(8.1);
  AdagradOptimizer opt(0.1f, 0.1f, /*epsilon=*/0.0f);
  std::vector<Tensor> w = TwoSteps(opt);
  ASSERT_EQ(w.size(), 2u);
  EXPECT_TRUE(TensorNear(w[0], {F(1 - d1a), F(2 - d1b)}, {2}));
  EXPECT_TRUE(TensorNear(w[1], {F(1 - d1a - d2a), F(2 - d1b - d2b)}, {2}));
  // epsilon outside the root: initial value 0, epsilon 1 -> lr g / (|g| + 1)
  // on the first step: [0.05, -0.2 / 3].
  AdagradOptimizer eps(0.1f, 0.0f, 1.0f);
  w = TwoSteps(eps);
  ASSERT_EQ(w.size(), 2u);
  EXPECT_TRUE(TensorNear(w[0], {0.95f, F(2 + 0.2 / 3)}, {2}));
}

}  // namespace
}  // namespace ipuflow::optimizers
