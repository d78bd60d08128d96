#include "optimizers/global_norm_clipping.h"

#include <cmath>

#include "core/half.h"
#include "core/ipu/ipu_strategy.h"
#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/collective/replica_index.h"
#include "ops/math/add.h"
#include "ops/math/cast.h"
#include "ops/math/mul.h"
#include "ops/math/reduce_sum.h"
#include "ops/state/read_variable.h"
#include "optimizers/cross_replica.h"
#include "optimizers/gradient_descent.h"
#include "optimizers/test_util.h"

namespace ipuflow::optimizers {
namespace {

using ::ipuflow::testing::RunGraph;
using ::ipuflow::testing::TensorNear;

TEST(ClipByGlobalNormTest, ScalesEveryGradientByOneFactor) {
  Scope s = Scope::NewRootScope();
  Output a = ops::Const<float>(s, {3, 4}, {2});
  Output b = ops::Const<float>(s, {12}, {1});
  // Global norm 13: clip 6.5 halves both; clip 20 leaves them.
  ClippedGradients half = ClipByGlobalNorm(s, {a, Output(), b}, 6.5f);
  ClippedGradients none = ClipByGlobalNorm(s, {a, b}, 20.0f);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_FALSE(half.gradients[1].valid());
  auto out = RunGraph(s, {},
                      {half.gradients[0], half.gradients[2], half.global_norm,
                       none.gradients[0], none.gradients[1]});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorNear((*out)[0], {1.5f, 2}, {2}));
  EXPECT_TRUE(TensorNear((*out)[1], {6}, {1}));
  EXPECT_NEAR((*out)[2].data<float>()[0], 13, 1e-5);
  EXPECT_TRUE(TensorNear((*out)[3], {3, 4}, {2}));
  EXPECT_TRUE(TensorNear((*out)[4], {12}, {1}));
  Scope bad = Scope::NewRootScope();
  ClipByGlobalNorm(bad, {ops::Const<float>(bad, {1}, {1})}, 0.0f);
  EXPECT_NE(bad.status().message().find("clip_norm must be finite and > 0"),
            std::string::npos)
      << bad.status();
}

std::unique_ptr<IPUSystem> MakeSystem(int ipus) {
  IPUConfig config;
  config.set_auto_select_ipus(ipus);
  auto system = IPUSystem::Create(config);
  EXPECT_TRUE(system.ok()) << system.status();
  return std::move(system).value();
}

// loss = sum(w * c_r) with c_r = (r + 1) * [3, 4] on replica r: the
// gradient is c_r.
Output ReplicaLoss(const Scope& s, const ops::VariableHandle& w) {
  Output r1 = ops::Add(s, ops::Cast(s, ops::ReplicaIndex(s), DType::kFloat32),
                       ops::Const(s, 1.0f));
  Output c = ops::Mul(s, ops::Const<float>(s, {3, 4}, {2}), r1);
  return ops::ReduceSum(s, ops::Mul(s, w.value, c));
}

// Averaged first: the mean gradient [4.5, 6] has norm 7.5; clip 1.5 scales
// it by 0.2: w = [1, 2] - 1 * [0.9, 1.2], on both replicas.
TEST(GlobalNormClippingTest, ReplicatedClipsTheMeanGradient) {
  Scope s = Scope::NewRootScope();
  ops::VariableHandle w =
      ops::Variable(s.WithOpName("w"), ops::Const<float>(s, {1, 2}, {2}));
  GradientDescentOptimizer sgd(1.0f);
  GlobalNormClippingOptimizer clip(&sgd, 1.5f);
  CrossReplicaOptimizer opt(&clip);
  Node* train = opt.Minimize(s, ReplicaLoss(s, w));
  ASSERT_TRUE(s.ok()) << s.status();
  auto system = MakeSystem(2);
  IPUStrategy strategy(system.get());
  ASSERT_TRUE(strategy.Initialize(*s.graph()).ok());
  ASSERT_TRUE(strategy.Run(*s.graph(), {}, {train}).ok());
  auto out = strategy.Run(*s.graph(), {ops::ReadVariable(s, w.handle)});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorNear((*out)[0], {0.1f, 0.8f, 0.1f, 0.8f}, {2, 2}));
}

// Parts on each replica: the squares are summed over the replicas, norm
// sqrt(25 + 100); each replica scales its own gradient by 5 / norm.
TEST(GlobalNormClippingTest, SumOverReplicasForParts) {
  Scope s = Scope::NewRootScope();
  ops::VariableHandle w =
      ops::Variable(s.WithOpName("w"), ops::Const<float>(s, {1, 2}, {2}));
  GradientDescentOptimizer sgd(1.0f);
  GlobalNormClippingOptimizer clip(&sgd, 5.0f, {.sum_over_replicas = true});
  Node* train = clip.Minimize(s, ReplicaLoss(s, w));
  ASSERT_TRUE(s.ok()) << s.status();
  auto system = MakeSystem(2);
  IPUStrategy strategy(system.get());
  ASSERT_TRUE(strategy.Initialize(*s.graph()).ok());
  ASSERT_TRUE(strategy.Run(*s.graph(), {}, {train}).ok());
  auto out = strategy.Run(*s.graph(), {ops::ReadVariable(s, w.handle)});
  ASSERT_TRUE(out.ok()) << out.status();
  const float k = 5.0f / std::sqrt(125.0f);
  EXPECT_TRUE(TensorNear((*out)[0],
                         {1 - 3 * k, 2 - 4 * k, 1 - 6 * k, 2 - 8 * k}, {2, 2}));
}

}  // namespace
}  // namespace ipuflow::optimizers
