// CrossReplicaOptimizer and the cross-replica gradient-accumulation wrapper
// on real replicas: every replica computes its own gradient (scaled by
// replica index + 1), and the applied update is checked by hand.
#include "optimizers/cross_replica.h"

#include <cmath>
#include <cstring>
#include <random>

#include "core/ipu/ipu_strategy.h"
#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/collective/replica_index.h"
#include "ops/math/add.h"
#include "ops/math/cast.h"
#include "ops/math/mul.h"
#include "ops/math/reduce_sum.h"
#include "ops/state/variable.h"
#include "optimizers/adam.h"
#include "optimizers/gradient_accumulation.h"
#include "optimizers/gradient_descent.h"

namespace ipuflow::optimizers {
namespace {

using ::ipuflow::testing::TensorNear;
using Method = GradientAccumulationReductionMethod;

// loss_r = sum(w * c * (r + 1)) on replica r: d loss_r / d w = c (r + 1).
struct ReplicaLoss {
  explicit ReplicaLoss(const Scope& s) {
    w = ops::Variable(s.WithOpName("w"), ops::Const<float>(s, {1, 2}, {2}));
    c = ops::Placeholder(s.WithOpName("c"), DType::kFloat32, {2});
    Output scale =
        ops::Add(s, ops::Cast(s, ops::ReplicaIndex(s), DType::kFloat32),
                 ops::Const(s, 1.f));
    loss = ops::ReduceSum(s, ops::Mul(s, ops::Mul(s, w.value, c), scale));
  }
  ops::VariableHandle w;
  Output c;
  Output loss;
};

// Runs `steps` training steps on `replicas` replicas, feeding c = g[i];
// returns w per replica after the last step ([replicas, 2]).
Tensor TrainReplicated(Optimizer& opt, int replicas,
                       const std::vector<std::vector<float>>& g) {
  Scope s = Scope::NewRootScope();
  ReplicaLoss l(s);
  Node* train = opt.Minimize(s, l.loss);
  EXPECT_TRUE(s.ok()) << s.status();
  IPUConfig config;
  config.set_auto_select_ipus(replicas);
  auto system = IPUSystem::Create(config);
  EXPECT_TRUE(system.ok()) << system.status();
  IPUStrategy strategy(system->get());
  EXPECT_TRUE(strategy.Initialize(*s.graph()).ok());
  for (const auto& c : g) {
    auto r = strategy.Run(*s.graph(), {}, {train},
                          {{l.c, Tensor::FromVector<float>(c)}});
    EXPECT_TRUE(r.ok()) << r.status();
  }
  auto w = strategy.Run(*s.graph(), {l.w.value});
  EXPECT_TRUE(w.ok()) << w.status();
  return (*w)[0];
}

TEST(CrossReplicaOptimizerTest, MeanOverFourReplicas) {
  GradientDescentOptimizer sgd(0.5f);
  CrossReplicaOptimizer opt(&sgd);
  EXPECT_EQ(opt.reduction(), ReplicaReduction::kMean);
  // Mean over r of c (r + 1) = 2.5 c: w = w0 - 0.5 * 2.5 * c.
  Tensor w = TrainReplicated(opt, 4, {{1, -2}});
  EXPECT_TRUE(
      TensorNear(w, {-0.25f, 4.5f, -0.25f, 4.5f, -0.25f, 4.5f, -0.25f, 4.5f},
                 {4, 2}, 0, 0));
}

TEST(CrossReplicaOptimizerTest, SumOverTwoReplicas) {
  GradientDescentOptimizer sgd(0.5f);
  CrossReplicaOptimizer opt(&sgd, ReplicaReduction::kSum);
  // Sum over r of c (r + 1) = 3 c: w = w0 - 1.5 c.
  Tensor w = TrainReplicated(opt, 2, {{1, -2}});
  EXPECT_TRUE(TensorNear(w, {-0.5f, 5, -0.5f, 5}, {2, 2}, 0, 0));
}

TEST(CrossReplicaOptimizerTest, IdentityOnOneReplicaAndSlotsKeepTheirNames) {
  GradientDescentOptimizer sgd(0.5f);
  CrossReplicaOptimizer opt(&sgd);
  Tensor w = TrainReplicated(opt, 1, {{1, -2}});
  EXPECT_TRUE(TensorNear(w, {0.5f, 3}, {2}, 0, 0));
}

TEST(CrossReplicaOptimizerTest, NullInnerIsAnError) {
  Scope s = Scope::NewRootScope();
  ReplicaLoss l(s);
  CrossReplicaOptimizer opt(static_cast<Optimizer*>(nullptr));
  EXPECT_EQ(opt.Minimize(s, l.loss), nullptr);
  EXPECT_NE(s.status().message().find("null"), std::string::npos) << s.status();
}

// Variables of many sizes (one over half the default threshold) and both
// float dtypes; loss_r = sum_k sum(w_k * c_k) (1 + 0.37 r) with c_k spread
// over 2^-10..2^10, so any other summation order changes bits. Returns
// every replica's weights after 3 Adam steps, concatenated, and the number
// of cross-replica collectives in the graph.
std::pair<std::vector<float>, int> TrainManyVariables(
    int64_t fusion_threshold_bytes, int steps = 3) {
  const std::vector<int64_t> sizes = {1, 3, 17, 250, 1000, 70000, 200000};
  constexpr int kReplicas = 4;
  Scope s = Scope::NewRootScope();
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> mant(-1, 1);
  std::uniform_int_distribution<int> exp(-10, 10);
  auto spread = [&](int64_t n) {
    std::vector<float> v(n);
    for (float& x : v) x = std::ldexp(mant(rng), exp(rng));
    return v;
  };
  Output scale =
      ops::Add(s,
               ops::Mul(s, ops::Cast(s, ops::ReplicaIndex(s), DType::kFloat32),
                        ops::Const(s, 0.37f)),
               ops::Const(s, 1.f));
  std::vector<Output> terms, values;
  for (size_t k = 0; k < sizes.size(); ++k) {
    auto w = ops::Variable(s.WithOpName(absl::StrCat("w", k)),
                           ops::Const<float>(s, spread(sizes[k]), {sizes[k]}));
    values.push_back(w.value);
    terms.push_back(ops::ReduceSum(
        s, ops::Mul(s, w.value,
                    ops::Const<float>(s, spread(sizes[k]), {sizes[k]}))));
  }
  auto h = ops::Variable(
      s.WithOpName("h"),
      ops::Cast(s, ops::Const<float>(s, spread(64), {64}), DType::kFloat16));
  values.push_back(ops::Cast(s, h.value, DType::kFloat32));
  terms.push_back(ops::ReduceSum(
      s, ops::Mul(s, values.back(), ops::Const<float>(s, spread(64), {64}))));
  Output loss = terms[0];
  for (size_t k = 1; k < terms.size(); ++k) loss = ops::Add(s, loss, terms[k]);
  loss = ops::Mul(s, loss, scale);
  AdamOptimizer adam(0.01f);
  CrossReplicaOptimizer opt(&adam, ReplicaReduction::kMean,
                            fusion_threshold_bytes);
  Node* train = opt.Minimize(s, loss);
  EXPECT_TRUE(s.ok()) << s.status();
  int collectives = 0;
  for (const Node* n : s.graph()->nodes()) {
    collectives += n->op() == "CrossReplicaMean";
  }
  IPUConfig config;
  config.set_auto_select_ipus(kReplicas);
  auto system = IPUSystem::Create(config);
  EXPECT_TRUE(system.ok()) << system.status();
  IPUStrategy strategy(system->get());
  EXPECT_TRUE(strategy.Initialize(*s.graph()).ok());
  for (int step = 0; step < steps; ++step) {
    EXPECT_TRUE(strategy.Run(*s.graph(), {}, {train}).ok());
  }
  auto out = strategy.Run(*s.graph(), values);
  EXPECT_TRUE(out.ok()) << out.status();
  std::vector<float> all;
  for (const Tensor& t : *out) {
    for (float x : t.ToVector<float>()) all.push_back(x);
  }
  return {all, collectives};
}

// Fusion changes the number of collectives, never a bit: one per gradient
// unfused; default: the 200000-element gradient (800 KB, over half of
// 1 MiB) alone, the other float32 ones in one bucket, the float16 one in
// its own; a 4 KiB threshold: buckets of at most 1024 floats.
TEST(CrossReplicaOptimizerTest, FusionChangesNoBit) {
  const auto [unfused, n_unfused] = TrainManyVariables(0);
  const auto [fused, n_fused] =
      TrainManyVariables(CrossReplicaOptimizer::kDefaultFusionThresholdBytes);
  const auto [small, n_small] = TrainManyVariables(4096);
  EXPECT_EQ(n_unfused, 8);
  EXPECT_EQ(n_fused, 3);
  // {1, 3, 17, 250} fused; 1000 alone (over 2 KiB); 70000 and 200000
  // alone; the float16 one alone.
  EXPECT_EQ(n_small, 5);
  ASSERT_EQ(unfused.size(), fused.size());
  EXPECT_EQ(
      std::memcmp(unfused.data(), fused.data(), unfused.size() * sizeof(float)),
      0);
  EXPECT_EQ(
      std::memcmp(unfused.data(), small.data(), unfused.size() * sizeof(float)),
      0);
  // And the steps moved every float32 weight (the test is not comparing
  // initial values; float16 ones over 4 move by less than their spacing).
  const auto [initial, n_initial] = TrainManyVariables(0, /*steps=*/0);
  ASSERT_EQ(initial.size(), fused.size());
  for (size_t i = 0; i + 4 * 64 < initial.size(); ++i) {
    ASSERT_NE(initial[i], fused[i]) << "element " << i;
  }
}

// Two reductions as two settings: the applied gradient after N = 2 steps
// with c1, c2 on R = 2 replicas (replica scales 1 and 2).
TEST(CrossReplicaGradientAccumulationTest, EffectiveGradientFormula) {
  const std::vector<std::vector<float>> g = {{1, -2}, {3, 0.5f}};
  const float c_sum[2] = {4, -1.5f};  // c1 + c2
  struct Case {
    Method micro;
    ReplicaReduction replicas;
    float factor;  // G = factor * (c1 + c2)
  };
  for (const Case& k :
       {Case{Method::kSum, ReplicaReduction::kMean, 1.5f},    // TensorFlow
        Case{Method::kMean, ReplicaReduction::kMean, 0.75f},  // PopTorch
        Case{Method::kRunningMean, ReplicaReduction::kMean, 0.75f},
        Case{Method::kSum, ReplicaReduction::kSum, 3.f},
        Case{Method::kMean, ReplicaReduction::kSum, 1.5f}}) {
    GradientDescentOptimizer sgd(0.5f);
    CrossReplicaGradientAccumulationOptimizerV2 opt(&sgd, 2, k.micro,
                                                    k.replicas);
    Tensor w = TrainReplicated(opt, 2, g);
    const float w0 = 1 - 0.5f * k.factor * c_sum[0];
    const float w1 = 2 - 0.5f * k.factor * c_sum[1];
    EXPECT_TRUE(TensorNear(w, {w0, w1, w0, w1}, {2, 2}, 1e-6, 1e-6))
        << static_cast<int>(k.micro) << " " << ReplicaReductionName(k.replicas)
        << ": " << w.DebugString();
  }
}

TEST(CrossReplicaGradientAccumulationTest, NoUpdateBeforeTheLastMiniBatch) {
  GradientDescentOptimizer sgd(0.5f);
  CrossReplicaGradientAccumulationOptimizerV2 opt(&sgd, 3);
  Tensor w = TrainReplicated(opt, 2, {{1, -2}, {3, 0.5f}});
  EXPECT_TRUE(TensorNear(w, {1, 2, 1, 2}, {2, 2}, 0, 0));
}

// V2 without the cross-replica wrapper: each replica applies its own
// accumulated gradient, so the replicas' weights differ.
TEST(CrossReplicaGradientAccumulationTest, V2AloneDoesNotSynchroniseReplicas) {
  GradientDescentOptimizer sgd(0.5f);
  GradientAccumulationOptimizerV2 opt(&sgd, 2);
  Tensor w = TrainReplicated(opt, 2, {{1, -2}, {3, 0.5f}});
  // Replica r: w0 - 0.5 (r + 1) (c1 + c2).
  EXPECT_TRUE(TensorNear(w, {-1, 2.75f, -3, 3.5f}, {2, 2}, 0, 0));
}

TEST(CrossReplicaGradientAccumulationTest, PerVariableDtype) {
  Scope s = Scope::NewRootScope();
  ReplicaLoss l(s);
  GradientDescentOptimizer sgd(0.5f);
  GradientAccumulationOptimizer opt(
      &sgd, 2, Method::kSum, AccumulationDType([](const ops::VariableInfo&) {
        return DType::kInt32;
      }));
  EXPECT_EQ(opt.Minimize(s, l.loss), nullptr);
  EXPECT_NE(s.status().message().find("accumulation dtype of 'w'"),
            std::string::npos)
      << s.status();

  Scope s16 = Scope::NewRootScope();
  ReplicaLoss l16(s16);
  GradientAccumulationOptimizer opt16(
      &sgd, 2, Method::kSum, AccumulationDType([](const ops::VariableInfo& v) {
        return v.name == "w" ? DType::kFloat16 : v.dtype;
      }));
  ASSERT_NE(opt16.Minimize(s16, l16.loss), nullptr) << s16.status();
  bool found = false;
  for (Node* n : s16.graph()->nodes()) {
    if (ops::IsVariable(n) &&
        n->name().find("accumulator") != std::string::npos) {
      EXPECT_EQ(n->attr<DType>("dtype"), DType::kFloat16) << n->name();
      found = true;
    }
  }
  EXPECT_TRUE(found);
}

}  // namespace
}  // namespace ipuflow::optimizers
