// The emulated IPU system: configuration, devices, memory budgets,
// replication, collectives, the compile cache and transfer counters.
#include "core/ipu/ipu_system.h"

#include <cstdlib>
#include <fstream>

#include "core/ipu/ipu_strategy.h"
#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/array/identity.h"
#include "ops/collective/cross_replica.h"
#include "ops/collective/replica_index.h"
#include "ops/math/add.h"
#include "ops/math/cast.h"
#include "ops/math/mul.h"
#include "ops/math/sub.h"
#include "ops/state/assign.h"
#include "ops/state/variable.h"

namespace ipuflow {
namespace {

using ::ipuflow::testing::TensorNear;

std::unique_ptr<IPUSystem> MakeSystem(int ipus, int tiles = 0,
                                      int64_t per_tile = 0) {
  IPUConfig config;
  config.set_auto_select_ipus(ipus);
  config.set_tiles_per_ipu(tiles);
  config.set_memory_per_tile(per_tile);
  auto system = IPUSystem::Create(config);
  EXPECT_TRUE(system.ok()) << system.status();
  return std::move(system).value();
}

TEST(IPUSystemTest, DefaultsAndBudget) {
  auto system = MakeSystem(0);
  EXPECT_EQ(system->num_ipus(), 1);
  EXPECT_EQ(system->device(0).memory_budget_bytes(), 1472LL * 624 * 1024);
}

TEST(IPUSystemTest, LoadsTextConfig) {
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/ipu.pbtxt";
  std::ofstream(path) << "auto_select_ipus: 4 tiles_per_ipu: 10";
  auto config = LoadIPUConfig(path);
  ASSERT_TRUE(config.ok()) << config.status();
  auto system = IPUSystem::Create(*config);
  ASSERT_TRUE(system.ok());
  EXPECT_EQ((*system)->num_ipus(), 4);
  EXPECT_EQ((*system)->device(3).memory_budget_bytes(), 10 * 624 * 1024);
  EXPECT_EQ(LoadIPUConfig(path + ".missing").status().code(),
            absl::StatusCode::kNotFound);
  std::ofstream(path) << "no_such_field: 1";
  EXPECT_EQ(LoadIPUConfig(path).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(IPUSystemTest, EachIpuHasItsOwnThread) {
  auto system = MakeSystem(2);
  std::thread::id ids[2];
  Notification done[2];
  for (int i = 0; i < 2; ++i) {
    system->device(i).Submit([&, i] {
      ids[i] = std::this_thread::get_id();
      done[i].Notify();
    });
  }
  done[0].WaitForNotification();
  done[1].WaitForNotification();
  EXPECT_NE(ids[0], ids[1]);
  EXPECT_NE(ids[0], std::this_thread::get_id());
}

TEST(IPUStrategyTest, SecondRunDoesNotRecompile) {
  auto system = MakeSystem(1);
  Scope s = Scope::NewRootScope();
  Output y = ops::Add(s, ops::Const(s, 1.0f), ops::Const(s, 2.0f));
  IPUStrategy strategy(system.get());
  for (int i = 0; i < 3; ++i) {
    auto out = strategy.Run(*s.graph(), {y});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_TRUE(TensorNear((*out)[0], {3}, {}));
  }
  EXPECT_EQ(strategy.num_compiles(), 1);
  // Reconfiguring the system invalidates compiled programs.
  ASSERT_TRUE(system->Configure(system->config()).ok());
  ASSERT_TRUE(strategy.Run(*s.graph(), {y}).ok());
  EXPECT_EQ(strategy.num_compiles(), 2);
}

TEST(IPUStrategyTest, ProgramTooBigIsResourceExhaustedWithReport) {
  auto system = MakeSystem(1, /*tiles=*/4, /*per_tile=*/16 * 1024);  // 64 KiB
  Scope s = Scope::NewRootScope();
  ops::Variable(
      s.WithOpName("big_weights"),
      ops::Const(s, Tensor::Filled(DType::kFloat32, {128, 256}, 0.5)));
  IPUStrategy strategy(system.get());
  absl::Status st = strategy.Initialize(*s.graph());
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted) << st;
  EXPECT_NE(st.message().find("'big_weights' float32[128,256] 128.00 KiB"),
            std::string::npos) << st;
  EXPECT_NE(st.message().find("always-live"), std::string::npos);
  EXPECT_NE(st.message().find("not-always-live"), std::string::npos);
  EXPECT_NE(st.message().find("4 tiles x 16.00 KiB"), std::string::npos) << st;
}

TEST(IPUStrategyTest, ShardsMustDivideTheIpus) {
  auto system = MakeSystem(3);
  Scope s = Scope::NewRootScope();
  Output a = ops::Const(s.WithIpu(0), 1.0f);
  Output b = ops::Add(s.WithIpu(1), a, a);
  IPUStrategy strategy(system.get());
  absl::Status st = strategy.Run(*s.graph(), {b}).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("sharded over 2 IPUs) uses 2 IPUs per replica but the system has 3"),
            std::string::npos) << st;
}

TEST(IPUStrategyTest, ShardsRunOnTheirOwnIpusInEveryReplica) {
  auto system = MakeSystem(4);  // 2 shards x 2 replicas.
  Scope s = Scope::NewRootScope();
  ops::VariableHandle w0 = ops::Variable(s.WithIpu(0).WithOpName("w0"),
                                         ops::Const<float>(s, {1, 2}, {2}));
  ops::VariableHandle w1 = ops::Variable(s.WithIpu(1).WithOpName("w1"),
                                         ops::Const<float>(s, {10, 20}, {2}));
  Output h = ops::Add(s.WithIpu(0), w0.value, w0.value);
  Output y = ops::Add(s.WithIpu(1), h, w1.value);
  IPUStrategy strategy(system.get());
  ASSERT_TRUE(strategy.Initialize(*s.graph()).ok());
  auto out = strategy.Run(*s.graph(), {y});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorNear((*out)[0], {12, 24, 12, 24}, {2, 2}));
  // Each shard's variables live on its own IPU, in every replica.
  for (int ipu : {0, 2}) {
    EXPECT_NE(system->device(ipu).resources()->FindVariable("w0"), nullptr);
    EXPECT_EQ(system->device(ipu).resources()->FindVariable("w1"), nullptr);
  }
  for (int ipu : {1, 3}) {
    EXPECT_NE(system->device(ipu).resources()->FindVariable("w1"), nullptr);
    EXPECT_EQ(system->device(ipu).resources()->FindVariable("w0"), nullptr);
  }
  // h crossed from shard 0 to shard 1: 8 bytes per replica per run.
  EXPECT_GE(system->device(0).counters().ipu_to_ipu.load(), 8);
}

TEST(IPUStrategyTest, ReplicasRunWithTheirOwnIndex) {
  auto system = MakeSystem(4);
  Scope s = Scope::NewRootScope();
  Output r = ops::ReplicaIndex(s);
  IPUStrategy strategy(system.get());
  auto out = strategy.Run(*s.graph(), {r});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorNear((*out)[0], {0, 1, 2, 3}, {4}));
}

TEST(IPUStrategyTest, CrossReplicaMeanKeepsReplicasBitwiseIdentical) {
  auto system = MakeSystem(4);
  Scope s = Scope::NewRootScope();
  ops::VariableHandle w = ops::Variable(
      s.WithOpName("w"), ops::Const<float>(s, {1.0f, 2.0f, 3.0f}, {3}));
  // A different "gradient" on every replica: (r + 1) * 0.1 * w.
  Output scale = ops::Mul(s, ops::Cast(s, ops::ReplicaIndex(s), DType::kFloat32),
                          ops::Const(s, 0.1f));
  Output grad = ops::Mul(s, w.value, ops::Add(s, scale, ops::Const(s, 0.1f)));
  Output mean = ops::CrossReplicaMean(s, grad);
  Node* update = ops::AssignSub(s, w.handle, mean);
  IPUStrategy strategy(system.get());
  ASSERT_TRUE(strategy.Initialize(*s.graph()).ok());
  for (int step = 0; step < 3; ++step) {
    ASSERT_TRUE(strategy.Run(*s.graph(), {}, {update}).ok());
  }
  auto out = strategy.Run(*s.graph(), {ops::Identity(s, w.value)});
  ASSERT_TRUE(out.ok()) << out.status();
  const Tensor& all = (*out)[0];  // [4, 3]
  ASSERT_EQ(all.shape(), TensorShape({4, 3}));
  for (int r = 1; r < 4; ++r) {
    EXPECT_EQ(std::memcmp(all.Slice(r, r + 1).raw_data(),
                          all.Slice(0, 1).raw_data(), 12), 0) << "replica " << r;
  }
  // Mean factor (0.1+0.2+0.3+0.4)/4 = 0.25: w *= 0.75 per step.
  const float f = 0.75f * 0.75f * 0.75f;
  EXPECT_TRUE(TensorNear(all.Slice(0, 1), {1 * f, 2 * f, 3 * f}, {1, 3}, 1e-5));
  // Ring all-reduce bytes were counted as IPU->IPU traffic.
  EXPECT_GT(system->device(0).counters().ipu_to_ipu.load(), 0);
}

TEST(IPUStrategyTest, CountsHostTransfers) {
  auto system = MakeSystem(1);
  Scope s = Scope::NewRootScope();
  Output x = ops::Placeholder(s, DType::kFloat32, {256});
  Output y = ops::Add(s, x, x);
  IPUStrategy strategy(system.get());
  ASSERT_TRUE(strategy.Run(*s.graph(), {y}, {},
                           {{x, Tensor::Filled(DType::kFloat32, {256}, 1)}})
                  .ok());
  EXPECT_EQ(system->device(0).counters().host_to_device.load(), 1024);
  EXPECT_EQ(system->device(0).counters().device_to_host.load(), 1024);
  EXPECT_NE(system->TransferReport().find("IPU 0: host->device 1.00 KiB"),
            std::string::npos) << system->TransferReport();
}

TEST(IPUStrategyTest, ReconfigureResetsVariables) {
  auto system = MakeSystem(1);
  Scope s = Scope::NewRootScope();
  ops::VariableHandle w = ops::Variable(s, ops::Const(s, 5.0f));
  IPUStrategy strategy(system.get());
  ASSERT_TRUE(strategy.Initialize(*s.graph()).ok());
  ASSERT_TRUE(strategy.Run(*s.graph(), {w.value}).ok());
  ASSERT_TRUE(system->Configure(system->config()).ok());
  absl::Status st = strategy.Run(*s.graph(), {w.value}).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
}

}  // namespace
}  // namespace ipuflow

namespace ipuflow {
namespace {

// The one execution model on a graph: Execute takes [replica][argument],
// ReadVariables returns [name][replica], replication_factor picks R.
TEST(ExecutableTest, PerReplicaArgumentsAndVariables) {
  IPUConfig config;
  config.set_auto_select_ipus(3);
  config.set_replication_factor(2);  // One IPU left idle.
  auto system = std::move(IPUSystem::Create(config)).value();
  Scope s = Scope::NewRootScope();
  Output x = ops::Placeholder(s, DType::kFloat32, {2});
  auto v = ops::Variable(s.WithOpName("acc"), ops::Const<float>(s, {0, 0}, {2}));
  Node* add = ops::AssignAdd(s, v.handle, x);
  IPUStrategy strategy(system.get());
  ASSERT_TRUE(strategy.Initialize(*s.graph()).ok());
  // The feed list gives the program its feeds and their shapes.
  auto exe = strategy.Compile(*s.graph(), {}, {add},
                              {{x, Tensor::FromVector<float>({0, 0})}});
  ASSERT_TRUE(exe.ok()) << exe.status();
  EXPECT_EQ((*exe)->num_replicas(), 2);
  std::vector<std::vector<Tensor>> results;
  ASSERT_TRUE((*exe)
                  ->Execute({{Tensor::FromVector<float>({1, 2})},
                             {Tensor::FromVector<float>({10, 20})}},
                            &results)
                  .ok());
  ASSERT_EQ(results.size(), 2u);
  auto vars = (*exe)->ReadVariables("acc");
  ASSERT_TRUE(vars.ok()) << vars.status();
  ASSERT_EQ(vars->at("acc").size(), 2u);
  EXPECT_TRUE(testing::TensorNear(vars->at("acc")[0], {1, 2}, {2}));
  EXPECT_TRUE(testing::TensorNear(vars->at("acc")[1], {10, 20}, {2}));
  // Lookups report, never abort.
  EXPECT_EQ((*exe)->ReadVariables("nothing.*").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ((*exe)->ReadVariables("(").status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ipuflow
