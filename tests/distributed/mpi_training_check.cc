// Run under `mpirun -np P` (//tests/distributed:mpi_training_test): a
// gradient-accumulation (V2) training loop with cross-replica Adam on
// P processes x R local replicas ends with bitwise the weights of one
// process with P x R replicas, with the optimizer state on the IPU and
// sharded over the global replicas (ZeRO-1); ReplicaIndex is global.
#include <cmath>
#include <cstring>
#include <random>

#include "core/distributed/mpi_link.h"
#include "core/half.h"
#include "core/ipu/ipu_strategy.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/collective/cross_replica.h"
#include "ops/collective/replica_index.h"
#include "ops/control/loops.h"
#include "ops/math/add.h"
#include "ops/math/cast.h"
#include "ops/math/mul.h"
#include "ops/math/reduce_sum.h"
#include "ops/math/sub.h"
#include "ops/nn/dropout.h"
#include "ops/nn/ipu_dropout.h"
#include "ops/state/assign.h"
#include "ops/state/read_variable.h"
#include "ops/state/variable.h"
#include "optimizers/adam.h"
#include "optimizers/gradient_accumulation.h"

namespace ipuflow {
namespace {

using optimizers::GradientAccumulationReductionMethod;
using optimizers::ReplicaReduction;
constexpr int kLocalReplicas = 2;
constexpr int kWidth = 1000;

std::shared_ptr<distributed::MpiLink> Link() {
  static std::shared_ptr<distributed::MpiLink> link =
      *distributed::MpiLink::World();
  return link;
}

// Inputs with exponents over 2^-10..2^10: the replicas' gradients sum to
// different bits in any order but rank order.
std::vector<std::vector<float>> Steps(int steps) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> mant(-1, 1);
  std::uniform_int_distribution<int> exp(-10, 10);
  std::vector<std::vector<float>> c(steps, std::vector<float>(kWidth));
  for (auto& step : c) {
    for (float& v : step) v = std::ldexp(mant(rng), exp(rng));
  }
  return c;
}

// Trains 4 steps of loss_r = sum(w * c * (1 + 0.37 r)) (r: the global
// ReplicaIndex) on `local` replicas of this system; returns w as
// [local, kWidth].
Tensor Train(int local, std::shared_ptr<ProcessLink> link, bool sharded) {
  Scope s = Scope::NewRootScope();
  std::vector<float> w0(kWidth);
  for (int j = 0; j < kWidth; ++j) w0[j] = 0.01f * j;
  auto w = ops::Variable(s.WithOpName("w"), ops::Const<float>(s, w0, {kWidth}));
  Output c = ops::Placeholder(s.WithOpName("c"), DType::kFloat32, {kWidth});
  Output scale =
      ops::Add(s,
               ops::Mul(s, ops::Cast(s, ops::ReplicaIndex(s), DType::kFloat32),
                        ops::Const(s, 0.37f)),
               ops::Const(s, 1.f));
  Output loss = ops::ReduceSum(s, ops::Mul(s, ops::Mul(s, w.value, c), scale));
  optimizers::AdamOptimizer adam(0.01f);
  optimizers::WeightUpdateOptions update;
  update.replicated_optimizer_state_sharding = sharded;
  optimizers::CrossReplicaGradientAccumulationOptimizerV2 opt(
      &adam, /*num_mini_batches=*/1, GradientAccumulationReductionMethod::kSum,
      ReplicaReduction::kMean, {}, update);
  Node* train = opt.Minimize(s, loss);
  EXPECT_TRUE(s.ok()) << s.status();

  IPUConfig config;
  config.set_auto_select_ipus(local);
  config.set_replication_factor(local);
  config.set_seed(1);
  auto system = IPUSystem::Create(config);
  EXPECT_TRUE(system.ok()) << system.status();
  if (link != nullptr) {
    EXPECT_TRUE((*system)->SetProcessLink(link).ok());
  }
  IPUStrategy strategy(system->get());
  EXPECT_TRUE(strategy.Initialize(*s.graph()).ok());
  for (const auto& step : Steps(4)) {
    auto r = strategy.Run(*s.graph(), {}, {train},
                          {{c, Tensor::FromVector<float>(step)}});
    EXPECT_TRUE(r.ok()) << r.status();
  }
  auto out = strategy.Run(*s.graph(), {w.value});
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? (*out)[0] : Tensor();
}

void ExpectAcrossEqualsOneProcess(bool sharded) {
  auto link = Link();
  const int P = link->process_count(), me = link->process_index();
  const Tensor one = Train(P * kLocalReplicas, nullptr, sharded);
  const Tensor across = Train(kLocalReplicas, link, sharded);
  ASSERT_EQ(one.NumElements(), P * kLocalReplicas * kWidth);
  ASSERT_EQ(across.NumElements(), kLocalReplicas * kWidth);
  const float* want = one.data<float>() + me * kLocalReplicas * kWidth;
  EXPECT_EQ(std::memcmp(across.data<float>(), want,
                        kLocalReplicas * kWidth * sizeof(float)),
            0)
      << "process " << me << " of " << P << " (sharded " << sharded
      << "): weights differ from one process with " << P * kLocalReplicas
      << " replicas";
  // And the weights moved.
  EXPECT_NE(across.data<float>()[1], 0.01f);
}

// A device loop of 6 steps on float16 weights with both dropouts and
// stochastic rounding on (ESR ON, so each replica rounds with its own
// stream): d = Dropout(x) + IpuDropout(x), x = float(w) * c;
// g = CrossReplicaMean(d * (1 + 0.37 r)), r the global ReplicaIndex;
// w <- half(float(w) - 2^-6 g). Returns w as [local, kWidth] float16.
Tensor DropoutLoop(int local, std::shared_ptr<ProcessLink> link) {
  Scope s = Scope::NewRootScope();
  std::vector<float> w0(kWidth);
  // Exact in float16: the initial Cast rounds nothing, stochastic or not.
  for (int j = 0; j < kWidth; ++j) w0[j] = 0.5f + j * 0x1p-11f;
  auto w = ops::Variable(
      s.WithOpName("w"),
      ops::Cast(s, ops::Const<float>(s, w0, {kWidth}), DType::kFloat16));
  const std::vector<float> c = Steps(1)[0];
  absl::StatusOr<loops::Loop> loop = loops::Repeat(
      s, 6,
      [&](const Scope& b, const std::vector<Output>& args) {
        Output wf =
            ops::Cast(b, ops::ReadVariable(b, w.handle), DType::kFloat32);
        Output x = ops::Mul(b, wf, ops::Const<float>(b, c, {kWidth}));
        Output d = ops::Add(b, ops::Dropout(b, x, 0.3f, 11).output,
                            ops::IpuDropout(b, x, 0.5f, 12).output);
        Output r = ops::Cast(b, ops::ReplicaIndex(b), DType::kFloat32);
        Output scale = ops::Add(b, ops::Mul(b, r, ops::Const(b, 0.37f)),
                                ops::Const(b, 1.f));
        Output g = ops::CrossReplicaMean(b, ops::Mul(b, d, scale));
        ops::Assign(
            b, w.handle,
            ops::Cast(b,
                      ops::Sub(b, wf, ops::Mul(b, g, ops::Const(b, 0x1p-6f))),
                      DType::kFloat16));
        return std::vector<Output>{ops::Add(b, args[0], ops::Const(b, 1.f))};
      },
      {ops::Const(s, 0.f)});
  EXPECT_TRUE(loop.ok()) << loop.status();
  EXPECT_TRUE(s.ok()) << s.status();
  if (!loop.ok() || !s.ok()) return Tensor();

  IPUConfig config;
  config.set_auto_select_ipus(local);
  config.set_replication_factor(local);
  config.set_seed(5);
  config.mutable_floating_point_behaviour()->set_esr(
      FloatingPointBehaviourConfig::ON);
  auto system = IPUSystem::Create(config);
  EXPECT_TRUE(system.ok()) << system.status();
  if (!system.ok()) return Tensor();
  if (link != nullptr) {
    EXPECT_TRUE((*system)->SetProcessLink(link).ok());
  }
  IPUStrategy strategy(system->get());
  EXPECT_TRUE(strategy.Initialize(*s.graph()).ok());
  EXPECT_TRUE(strategy.Run(*s.graph(), loop->outputs).ok());
  auto out = strategy.Run(*s.graph(), {w.value});
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? (*out)[0] : Tensor();
}

// Issue 33: random streams keyed by the global replica. Each process's
// replicas draw the masks and rounding of the same global replicas of one
// process with P x R replicas.
TEST(MpiTrainingTest, DropoutAndStochasticRoundingAsOneProcess) {
  auto link = Link();
  const int P = link->process_count(), me = link->process_index();
  const Tensor one = DropoutLoop(P * kLocalReplicas, nullptr);
  const Tensor across = DropoutLoop(kLocalReplicas, link);
  ASSERT_EQ(one.NumElements(), P * kLocalReplicas * kWidth);
  ASSERT_EQ(across.NumElements(), kLocalReplicas * kWidth);
  const size_t bytes = kLocalReplicas * kWidth * sizeof(half);
  EXPECT_EQ(
      std::memcmp(across.raw_data(),
                  static_cast<const char*>(one.raw_data()) + me * bytes, bytes),
      0)
      << "process " << me << " of " << P
      << ": float16 weights after dropout and stochastic rounding differ "
         "from one process with "
      << P * kLocalReplicas << " replicas";
  // The replicas differ: their masks and rounding do.
  EXPECT_NE(std::memcmp(across.raw_data(),
                        static_cast<const char*>(across.raw_data()) +
                            kWidth * sizeof(half),
                        kWidth * sizeof(half)),
            0);
}

TEST(MpiTrainingTest, UnevenReplicasAreRefusedOnEveryProcess) {
  auto link = Link();
  if (link->process_count() < 2) GTEST_SKIP();
  IPUConfig config;
  const int local = link->process_index() == 1 ? 2 : 1;
  config.set_auto_select_ipus(local);
  config.set_replication_factor(local);
  auto system = IPUSystem::Create(config);
  ASSERT_TRUE(system.ok());
  absl::Status s = (*system)->SetProcessLink(link);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("process 0: 1, process 1: 2"), std::string::npos)
      << s;
}

// A strategy on `local` replicas of a system linked to the other processes.
struct Linked {
  std::unique_ptr<IPUSystem> system;
  std::unique_ptr<IPUStrategy> strategy;
};
Linked LinkedStrategy(int local) {
  IPUConfig config;
  config.set_auto_select_ipus(local);
  config.set_replication_factor(local);
  config.set_seed(3);
  auto system = IPUSystem::Create(config);
  EXPECT_TRUE(system.ok()) << system.status();
  EXPECT_TRUE((*system)->SetProcessLink(Link()).ok());
  Linked l{*std::move(system), nullptr};
  l.strategy = std::make_unique<IPUStrategy>(l.system.get());
  return l;
}

// Initial values that differ by process (as weights loaded from a file on
// process 0 only would): after Initialize every replica of every process
// holds process 0's.
TEST(MpiTrainingTest, InitialVariablesComeFromProcessZero) {
  const int me = Link()->process_index();
  Scope s = Scope::NewRootScope();
  std::vector<float> w0(kWidth);
  for (int j = 0; j < kWidth; ++j) w0[j] = 100.f * me + j;
  auto w = ops::Variable(s.WithOpName("w"), ops::Const<float>(s, w0, {kWidth}));
  auto step = ops::Variable(s.WithOpName("step"),
                            ops::Const(s, Tensor::Scalar<int32_t>(me)));
  ASSERT_TRUE(s.ok()) << s.status();
  Linked l = LinkedStrategy(kLocalReplicas);
  ASSERT_TRUE(l.strategy->Initialize(*s.graph()).ok());
  auto out = l.strategy->Run(*s.graph(), {w.value, step.value});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ((*out)[0].NumElements(), kLocalReplicas * kWidth);
  for (int r = 0; r < kLocalReplicas; ++r) {
    for (int j = 0; j < kWidth; ++j) {
      ASSERT_EQ((*out)[0].data<float>()[r * kWidth + j], float(j))
          << "process " << me << " replica " << r << " element " << j;
    }
    EXPECT_EQ((*out)[1].data<int32_t>()[r], 0) << "process " << me;
  }
}

// A process that built another model: every process refuses, naming the
// variable and the process.
TEST(MpiTrainingTest, DifferentModelsAreRefusedOnEveryProcess) {
  auto link = Link();
  if (link->process_count() < 2) GTEST_SKIP();
  const int me = link->process_index();
  Scope s = Scope::NewRootScope();
  ops::Variable(s.WithOpName("w"),
                ops::Const<float>(s, std::vector<float>(me == 1 ? 3 : 4, 1.f),
                                  {me == 1 ? 3 : 4}));
  ASSERT_TRUE(s.ok()) << s.status();
  Linked l = LinkedStrategy(1);
  absl::Status st = l.strategy->Initialize(*s.graph());
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
  EXPECT_NE(st.message().find("process 0 has 'w float32 [4]' where it has "
                              "'w float32 [3]' on process 1"),
            std::string::npos)
      << st;
}

TEST(MpiTrainingTest, AccumulatingLoopAsOneProcess) {
  ExpectAcrossEqualsOneProcess(/*sharded=*/false);
}

TEST(MpiTrainingTest, ShardedOptimizerStateAsOneProcess) {
  ExpectAcrossEqualsOneProcess(/*sharded=*/true);
}

}  // namespace
}  // namespace ipuflow
