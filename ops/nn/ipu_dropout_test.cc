#include "ops/nn/ipu_dropout.h"

#include "core/gradients.h"
#include "core/ipu/ipu_strategy.h"
#include "core/session.h"
#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/testing/half_check.h"

namespace ipuflow::ops {
namespace {

using ::ipuflow::testing::RandomTensor;
using ::ipuflow::testing::TensorNear;

// The backward regenerates the forward's mask from the key alone: dx is dy
// where y kept x (times the scale), 0 where it dropped it; the gradient
// graph reads no tensor of x's size from the forward.
TEST(IpuDropoutTest, BackwardRegeneratesTheMask) {
  Scope s = Scope::NewRootScope();
  const Tensor xv = RandomTensor({64, 33}, 1, 2, 1);  // Never 0.
  Output x = Const(s, xv);
  auto drop = IpuDropout(s, x, 0.25f, /*seed=*/11);
  Output dy = Const(s, RandomTensor({64, 33}, 1, 2, 2));
  std::vector<Output> dx;
  ASSERT_TRUE(AddGradients(s, {drop.output}, {x}, {dy}, &dx).ok());
  EXPECT_EQ(dx[0].node->op(), "IpuDropoutWithSeed");
  EXPECT_EQ(dx[0].node->input(1), drop.seed);
  EXPECT_EQ(drop.seed.shape(), TensorShape());
  Session session(s.graph());
  std::vector<Tensor> out;
  ASSERT_TRUE(session.Run({}, {drop.output, dx[0], dy}, &out).ok());
  int kept = 0;
  for (int64_t i = 0; i < xv.NumElements(); ++i) {
    const float y = out[0].data<float>()[i], g = out[1].data<float>()[i];
    const float d = out[2].data<float>()[i];
    if (y == 0.0f) {
      EXPECT_EQ(g, 0.0f) << i;
    } else {
      ++kept;
      EXPECT_FLOAT_EQ(y, xv.data<float>()[i] / 0.75f) << i;
      EXPECT_FLOAT_EQ(g, d / 0.75f) << i;
    }
  }
  // 2112 elements kept with probability 0.75: 1584 +- 5 sigma (99).
  EXPECT_NEAR(kept, 1584, 99);
}

// A new mask per run; the same sequence for the same seed in another
// graph; a different mask on each replica.
TEST(IpuDropoutTest, ReproduciblePerRunAndReplica) {
  auto masks = [](int64_t seed) {
    Scope s = Scope::NewRootScope();
    Output y = IpuDropout(s, Const(s, RandomTensor({100}, 1, 2, 1)), 0.5f, seed)
                   .output;
    Session session(s.graph());
    std::vector<Tensor> a, b;
    EXPECT_TRUE(session.Run({}, {y}, &a).ok());
    EXPECT_TRUE(session.Run({}, {y}, &b).ok());
    return std::make_pair(a[0], b[0]);
  };
  auto [a1, a2] = masks(3);
  auto [b1, b2] = masks(3);
  auto [c1, c2] = masks(4);
  EXPECT_TRUE(TensorNear(a1, b1, 0, 0));
  EXPECT_TRUE(TensorNear(a2, b2, 0, 0));
  EXPECT_FALSE(TensorNear(a1, a2, 0, 0));
  EXPECT_FALSE(TensorNear(a1, c1, 0, 0));
  Scope s = Scope::NewRootScope();
  Output y =
      IpuDropout(s, Const(s, RandomTensor({100}, 1, 2, 1)), 0.5f, 3).output;
  IPUConfig config;
  config.set_auto_select_ipus(2);
  auto system = IPUSystem::Create(config);
  ASSERT_TRUE(system.ok()) << system.status();
  IPUStrategy strategy(system->get());
  auto rep = strategy.Run(*s.graph(), {y});
  ASSERT_TRUE(rep.ok()) << rep.status();
  const Tensor r0 = *rep->at(0).Reshaped({2, 100});
  std::vector<float> first(r0.data<float>(), r0.data<float>() + 100);
  std::vector<float> second(r0.data<float>() + 100, r0.data<float>() + 200);
  // Replica 0's first run is the host's first run; replica 1 differs.
  EXPECT_TRUE(TensorNear(Tensor::FromVector<float>(first, {100}), a1, 0, 0));
  EXPECT_NE(first, second);
}

TEST(IpuDropoutTest, Float16AndErrors) {
  absl::StatusOr<::ipuflow::testing::HalfCheck> c =
      ::ipuflow::testing::CompareHalfToFloat(
          [](const Scope& s, const std::vector<Output>& x) {
            return IpuDropout(s, x[0], 0.3f, 5).output;
          },
          {RandomTensor({8, 9}, -2, 2, 1)});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_LT(c->forward_error, 2e-3);
  EXPECT_LT(c->gradient_error, 2e-3);
  Scope s = Scope::NewRootScope();
  IpuDropout(s.WithOpName("drop"), Const<float>(s, {1}, {1}), 1.0f);
  EXPECT_NE(s.status().message().find(
                "IpuDropout 'drop': rate must be in [0, 1), got 1"),
            std::string::npos)
      << s.status();
}

}  // namespace
}  // namespace ipuflow::ops
