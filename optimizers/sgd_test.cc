#include "optimizers/sgd.h"

#include <cmath>

#include "core/session.h"
#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "optimizers/test_util.h"

namespace ipuflow::optimizers {
namespace {

using ::ipuflow::optimizers::testing::LinearLoss;
using ::ipuflow::optimizers::testing::RunSteps;
using ::ipuflow::testing::TensorNear;

// Three steps from w = [1, 2] with gradient c = [1, -2] (loss = sum(w c)).
std::vector<Tensor> ThreeSteps(const SGDOptions& o) {
  Scope s = Scope::NewRootScope();
  LinearLoss l(s, "w", {1, 2});
  Node* train = SGDOptimizer(0.1f, o).Minimize(s, l.loss);
  return RunSteps(s, train, {l.Feed({1, -2}), l.Feed({1, -2}), l.Feed({1, -2})},
                  l.w.value);
}

TEST(SGDTest, WeightDecayAlone) {
  // d = c + 0.5 w:  w1 = [1, 2] - 0.1 [1.5, -1] = [0.85, 2.1]
  // w2 = w1 - 0.1 ([1, -2] + 0.5 w1) = [0.7075, 2.195]
  std::vector<Tensor> w = ThreeSteps({.weight_decay = 0.5f});
  ASSERT_EQ(w.size(), 3u);
  EXPECT_TRUE(TensorNear(w[0], {0.85f, 2.1f}, {2}));
  EXPECT_TRUE(TensorNear(w[1], {0.7075f, 2.195f}, {2}));
}

TEST(SGDTest, MomentumWithDampeningStartsFromTheFirstGradient) {
  // buf1 = c = [1, -2] (not dampened):  w1 = [0.9, 2.2]
  // buf2 = 0.9 buf1 + 0.5 c = [1.4, -2.8]:  w2 = [0.76, 2.48]
  // buf3 = 0.9 buf2 + 0.5 c = [1.76, -3.52]:  w3 = [0.584, 2.832]
  std::vector<Tensor> w = ThreeSteps({.momentum = 0.9f, .dampening = 0.5f});
  ASSERT_EQ(w.size(), 3u);
  EXPECT_TRUE(TensorNear(w[0], {0.9f, 2.2f}, {2}));
  EXPECT_TRUE(TensorNear(w[1], {0.76f, 2.48f}, {2}));
  EXPECT_TRUE(TensorNear(w[2], {0.584f, 2.832f}, {2}));
}

TEST(SGDTest, NesterovWithWeightDecay) {
  // d1 = c + 0.1 w0 = [1.1, -1.8]; buf1 = d1; w1 = w0 - 0.1 (d1 + 0.9 d1)
  //    = [1, 2] - 0.19 [1.1, -1.8] = [0.791, 2.342]
  // d2 = c + 0.1 w1 = [1.0791, -1.7658]; buf2 = 0.9 d1 + d2
  //    = [2.0691, -3.3858]; w2 = w1 - 0.1 (d2 + 0.9 buf2)
  //    = [0.791 - 0.294129, 2.342 + 0.481302] = [0.496871, 2.823302]
  std::vector<Tensor> w =
      ThreeSteps({.momentum = 0.9f, .weight_decay = 0.1f, .nesterov = true});
  ASSERT_EQ(w.size(), 3u);
  EXPECT_TRUE(TensorNear(w[0], {0.791f, 2.342f}, {2}));
  EXPECT_TRUE(TensorNear(w[1], {0.496871f, 2.823302f}, {2}));
}

// Issue 30: torch.optim.SGD's checks, when the update is built (Nesterov's
// failed only when the step ran; a momentum of -1 trained silently).
TEST(SGDTest, OptionsOutOfRangeAreRefusedWhenBuilt) {
  const float kNaN = std::nanf(""), kInf = INFINITY;
  struct Bad {
    float lr;
    SGDOptions options;
    const char* message;
  };
  const Bad bad[] = {
      {0.1f, {.momentum = -1}, "momentum is -1; it must be a finite number"},
      {0.1f, {.momentum = kNaN}, "momentum is nan"},
      {0.1f, {.momentum = kInf}, "momentum is inf"},
      {0.1f, {.momentum = 0.9f, .dampening = -0.5f}, "dampening is -0.5"},
      {0.1f, {.momentum = 0.9f, .dampening = 2}, "dampening is 2"},
      {0.1f, {.weight_decay = -0.5f}, "weight_decay is -0.5; it must be"},
      {0.1f, {.weight_decay = kNaN}, "weight_decay is nan"},
      {kNaN, {}, "learning_rate is nan"},
      {kInf, {}, "learning_rate is inf"},
      {0.1f,
       {.momentum = 0.9f, .dampening = 0.1f, .nesterov = true},
       "nesterov is true: Nesterov momentum requires a momentum > 0 and zero "
       "dampening (got momentum 0.9, dampening 0.1)"},
      {0.1f, {.nesterov = true}, "Nesterov momentum requires a momentum > 0"},
  };
  for (const Bad& b : bad) {
    Scope s = Scope::NewRootScope();
    LinearLoss l(s, "w", {1, 2});
    EXPECT_EQ(SGDOptimizer(b.lr, b.options).Minimize(s, l.loss), nullptr);
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument)
        << s.status();
    EXPECT_NE(s.status().message().find("SGD optimizer: "), std::string::npos)
        << s.status();
    EXPECT_NE(s.status().message().find(b.message), std::string::npos)
        << s.status();
  }
  // The edges are fine: no momentum, full dampening, no decay.
  Scope s = Scope::NewRootScope();
  LinearLoss l(s, "w", {1, 2});
  EXPECT_NE(
      SGDOptimizer(0.f, {.momentum = 0, .dampening = 1}).Minimize(s, l.loss),
      nullptr)
      << s.status();
}

}  // namespace
}  // namespace ipuflow::optimizers
