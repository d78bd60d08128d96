// IPUConfig.floating_point_behaviour on the emulated IPUs: the config
// reaches every replica's programs, set_all, the seed, stochastic rounding
// across replicas (ON: each replica its own bits; REPLICA_IDENTICAL_ONLY:
// replica-identical tensors stay bitwise identical, others round to
// nearest), and a trap stopping a replicated run.
#include <cstring>

#include "core/half.h"
#include "core/half_rounding.h"
#include "core/ipu/ipu_strategy.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/array/identity.h"
#include "ops/collective/cross_replica.h"
#include "ops/collective/replica_index.h"
#include "ops/control/loops.h"
#include "ops/math/add.h"
#include "ops/math/cast.h"
#include "ops/math/mul.h"
#include "ops/state/assign.h"
#include "ops/state/read_variable.h"
#include "ops/state/variable.h"

namespace ipuflow {
namespace {

using Esr = FloatingPointBehaviourConfig;

std::unique_ptr<IPUSystem> MakeSystem(int ipus,
                                      Esr::StochasticRoundingBehaviour esr,
                                      uint64_t seed) {
  IPUConfig config;
  config.set_auto_select_ipus(ipus);
  config.mutable_floating_point_behaviour()->set_esr(esr);
  config.set_seed(seed);
  auto system = IPUSystem::Create(config);
  EXPECT_TRUE(system.ok()) << system.status();
  return std::move(system).value();
}

TEST(FloatingPointConfigTest, SetAllAndSeed) {
  IPUConfig config;
  config.mutable_floating_point_behaviour()->set_set_all(true);
  auto system = IPUSystem::Create(config);
  ASSERT_TRUE(system.ok());
  const FloatingPointBehaviour& fp = (*system)->floating_point();
  EXPECT_TRUE(fp.inv && fp.div0 && fp.oflo && fp.nanoo);
  EXPECT_EQ(fp.esr, StochasticRounding::kOn);
  // No seed given: one was drawn, and is visible.
  EXPECT_TRUE((*system)->config().has_seed());
  EXPECT_EQ(fp.seed, (*system)->config().seed());
  // Defaults: everything off (TensorFlow's).
  auto plain = IPUSystem::Create(IPUConfig());
  ASSERT_TRUE(plain.ok());
  const FloatingPointBehaviour& off = (*plain)->floating_point();
  EXPECT_FALSE(off.inv || off.div0 || off.oflo || off.nanoo);
  EXPECT_EQ(off.esr, StochasticRounding::kOff);
}

constexpr int64_t kN = 2048;
const float kX = 1.0f + 0x1p-10f / 2;  // Halfway: P(hi) = 1/2.

struct Rounded {
  Tensor identical;    // [2, kN] float16: a constant, rounded.
  Tensor per_replica;  // The same values, through the replica index.
};

Rounded RunOn(IPUSystem* system) {
  Scope s = Scope::NewRootScope();
  Output c = ops::Const(s, std::vector<float>(kN, kX), TensorShape({kN}));
  Output zero = ops::Mul(s, ops::Cast(s, ops::ReplicaIndex(s), DType::kFloat32),
                         ops::Const(s, 0.f));
  Output h_id = ops::Cast(s, c, DType::kFloat16);
  Output h_rep = ops::Cast(s, ops::Add(s, c, zero), DType::kFloat16);
  IPUStrategy strategy(system);
  auto out = strategy.Run(*s.graph(), {h_id, h_rep});
  IPU_CHECK_OK(out.status());
  return {(*out)[0], (*out)[1]};
}

bool RowsEqual(const Tensor& t) {
  return std::memcmp(t.Slice(0, 1).raw_data(), t.Slice(1, 2).raw_data(),
                     kN * sizeof(half)) == 0;
}

int64_t CountUp(const Tensor& row) {
  std::vector<float> v(kN);
  WidenHalf(row.data<half>(), v.data(), kN);
  return std::count_if(v.begin(), v.end(), [](float f) { return f > 1.0f; });
}

TEST(FloatingPointConfigTest,
     ReplicaIdenticalOnlyKeepsIdenticalTensorsIdentical) {
  auto system = MakeSystem(2, Esr::REPLICA_IDENTICAL_ONLY, 11);
  const Rounded r = RunOn(system.get());
  ASSERT_EQ(r.identical.shape(), TensorShape({2, kN}));
  EXPECT_TRUE(RowsEqual(r.identical));
  const int64_t up = CountUp(r.identical.Slice(0, 1));
  EXPECT_GT(up, kN / 4);  // Stochastic, about half up.
  EXPECT_LT(up, 3 * kN / 4);
  // Not replica-identical: rounded to nearest (even: 1.0).
  EXPECT_EQ(CountUp(r.per_replica.Slice(0, 1)), 0);
  EXPECT_EQ(CountUp(r.per_replica.Slice(1, 2)), 0);
  // Same seed, new system: bitwise the same.
  auto again = MakeSystem(2, Esr::REPLICA_IDENTICAL_ONLY, 11);
  const Rounded r2 = RunOn(again.get());
  EXPECT_EQ(std::memcmp(r.identical.raw_data(), r2.identical.raw_data(),
                        2 * kN * sizeof(half)),
            0);
}

TEST(FloatingPointConfigTest, OnRoundsEachReplicaWithItsOwnBits) {
  auto system = MakeSystem(2, Esr::ON, 11);
  const Rounded r = RunOn(system.get());
  EXPECT_FALSE(RowsEqual(r.identical));
  EXPECT_FALSE(RowsEqual(r.per_replica));
  EXPECT_GT(CountUp(r.per_replica.Slice(1, 2)), kN / 4);
}

// A device loop updates w <- half(w + allreduce(replica-dependent g)) on 2
// replicas: with REPLICA_IDENTICAL_ONLY the rounding is stochastic and the
// replicas' weights stay bitwise equal; with ON they drift apart.
Tensor TrainInALoop(Esr::StochasticRoundingBehaviour esr) {
  auto system = MakeSystem(2, esr, 3);
  Scope s = Scope::NewRootScope();
  ops::VariableHandle w = ops::Variable(
      s.WithOpName("w"),
      ops::Const(s, std::vector<float>(kN, 1.0f), TensorShape({kN})));
  absl::StatusOr<loops::Loop> loop = loops::Repeat(
      s, 8,
      [&](const Scope& b, const std::vector<Output>& args) {
        Output r = ops::Cast(b, ops::ReplicaIndex(b), DType::kFloat32);
        Output g = ops::CrossReplicaMean(
            b, ops::Mul(b, ops::Add(b, r, ops::Const(b, 1.f)),
                        ops::Const(b, 0x1p-12f)));  // 1.5 * 2^-12.
        Output next = ops::Cast(
            b,
            ops::Cast(b, ops::Add(b, ops::ReadVariable(b, w.handle), g),
                      DType::kFloat16),
            DType::kFloat32);
        ops::Assign(b, w.handle, next);
        return std::vector<Output>{ops::Add(b, args[0], ops::Const(b, 1.f))};
      },
      {ops::Const(s, 0.f)});
  IPU_CHECK_OK(loop.status());
  IPUStrategy strategy(system.get());
  IPU_CHECK_OK(strategy.Initialize(*s.graph()));
  IPU_CHECK_OK(strategy.Run(*s.graph(), loop->outputs).status());
  auto out = strategy.Run(*s.graph(), {ops::Identity(s, w.value)});
  IPU_CHECK_OK(out.status());
  return (*out)[0];
}

TEST(FloatingPointConfigTest, ReplicaIdenticalWeightsStayIdenticalInALoop) {
  const Tensor w = TrainInALoop(Esr::REPLICA_IDENTICAL_ONLY);
  ASSERT_EQ(w.shape(), TensorShape({2, kN}));
  EXPECT_EQ(std::memcmp(w.Slice(0, 1).raw_data(), w.Slice(1, 2).raw_data(),
                        kN * sizeof(float)),
            0);
  // 1 + 8 * 1.5 * 2^-12 = 1 + 3 * 2^-10 on average: stochastic steps of
  // 2^-10 (nearest would round every 1.5 * 2^-12 step away: w stays 1).
  double sum = 0;
  for (float v : w.Slice(0, 1).span<float>()) sum += v;
  EXPECT_NEAR(sum / kN, 1.0 + 3 * 0x1p-10, 0.2 * 0x1p-10);
  const Tensor on = TrainInALoop(Esr::ON);
  EXPECT_NE(std::memcmp(on.Slice(0, 1).raw_data(), on.Slice(1, 2).raw_data(),
                        kN * sizeof(float)),
            0);
}

TEST(FloatingPointConfigTest, ResetSeedRepeatsTheRoundingOfTheRunsAfterIt) {
  auto system = MakeSystem(2, Esr::ON, 5);
  Scope s = Scope::NewRootScope();
  Output h =
      ops::Cast(s, ops::Const(s, std::vector<float>(kN, kX), TensorShape({kN})),
                DType::kFloat16);
  IPUStrategy strategy(system.get());
  auto bits = [&] {
    auto out = strategy.Run(*s.graph(), {h});
    IPU_CHECK_OK(out.status());
    std::vector<uint16_t> b(2 * kN);
    std::memcpy(b.data(), (*out)[0].raw_data(), b.size() * 2);
    return b;
  };
  const std::vector<uint16_t> first = bits();
  const std::vector<uint16_t> second = bits();
  EXPECT_NE(first, second);  // Each run its own bits.
  ASSERT_TRUE(system->ResetSeed(5).ok());
  EXPECT_EQ(bits(), first);
  EXPECT_EQ(bits(), second);
  ASSERT_TRUE(system->ResetSeed(6).ok());
  EXPECT_NE(bits(), first);
  EXPECT_EQ(system->config().seed(), 6u);
}

TEST(FloatingPointConfigTest, TrapStopsEveryReplica) {
  IPUConfig config;
  config.set_auto_select_ipus(2);
  config.mutable_floating_point_behaviour()->set_oflo(true);
  auto system = IPUSystem::Create(config);
  ASSERT_TRUE(system.ok());
  Scope s = Scope::NewRootScope();
  Output y =
      ops::Mul(s.WithOpName("m"),
               ops::Const(s, std::vector<float>{1, 1e20f}, TensorShape({2})),
               ops::Const(s, 1e20f));
  IPUStrategy strategy(system->get());
  auto out = strategy.Run(*s.graph(), {y});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find(
                "floating-point exception (oflo): Mul 'm' output 0 element 1 "
                "is inf from finite inputs"),
            std::string::npos)
      << out.status();
}

// Issue 22: a float-to-integer Cast of a value the integer cannot hold is
// an invalid operation: with inv on it stops the run naming the node and
// the element; with inv off it saturates (NaN to 0).
TEST(FloatingPointConfigTest, FloatToIntegerCastTrapsWithInv) {
  for (bool inv : {false, true}) {
    IPUConfig config;
    config.mutable_floating_point_behaviour()->set_inv(inv);
    auto system = IPUSystem::Create(config);
    ASSERT_TRUE(system.ok());
    Scope s = Scope::NewRootScope();
    Output x = ops::Const(s, std::vector<float>{1.5f, std::nanf(""), 3e9f},
                          TensorShape({3}));
    Output y = ops::Cast(s.WithOpName("to_int"), x, DType::kInt32);
    Output ok = ops::Cast(
        s.WithOpName("in_range"),
        ops::Const(s, std::vector<float>{-2.5f, 7.f}, TensorShape({2})),
        DType::kInt64);
    IPUStrategy strategy(system->get());
    auto out = strategy.Run(*s.graph(), {y, ok});
    if (!inv) {
      ASSERT_TRUE(out.ok()) << out.status();
      EXPECT_EQ((*out)[0].data<int32_t>()[0], 1);
      EXPECT_EQ((*out)[0].data<int32_t>()[1], 0);
      EXPECT_EQ((*out)[0].data<int32_t>()[2], INT32_MAX);
      continue;
    }
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(out.status().message().find(
                  "floating-point exception (inv): Cast 'to_int' input "
                  "element 1 is nan, which int32 cannot hold"),
              std::string::npos)
        << out.status();
    // In range: no trap.
    auto fine = strategy.Run(*s.graph(), {ok});
    ASSERT_TRUE(fine.ok()) << fine.status();
    EXPECT_EQ((*fine)[0].data<int64_t>()[0], -2);
  }
}

}  // namespace
}  // namespace ipuflow
