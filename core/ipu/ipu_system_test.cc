// The emulated IPU system: configuration, devices, memory budgets,
// replication, collectives, the compile cache and transfer counters.
#include "core/ipu/ipu_system.h"

#include <cstdlib>
#include <fstream>

#include "core/ipu/ipu_strategy.h"
#include "core/testing/op_test.h"
#include "core/thread_pool.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/array/fill.h"
#include "ops/array/gather.h"
#include "ops/array/identity.h"
#include "ops/collective/cross_replica.h"
#include "ops/collective/replica_index.h"
#include "ops/control/loops.h"
#include "ops/math/add.h"
#include "ops/math/cast.h"
#include "ops/math/mul.h"
#include "ops/math/reduce_sum.h"
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
  const std::string path =
      std::string(std::getenv("TEST_TMPDIR")) + "/ipu.pbtxt";
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
            std::string::npos)
      << st;
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
  EXPECT_NE(
      st.message().find(
          "sharded over 2 IPUs) uses 2 IPUs per replica but the system has 3"),
      std::string::npos)
      << st;
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
  Output scale =
      ops::Mul(s, ops::Cast(s, ops::ReplicaIndex(s), DType::kFloat32),
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
                          all.Slice(0, 1).raw_data(), 12),
              0)
        << "replica " << r;
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
  ASSERT_TRUE(strategy
                  .Run(*s.graph(), {y}, {},
                       {{x, Tensor::Filled(DType::kFloat32, {256}, 1)}})
                  .ok());
  EXPECT_EQ(system->device(0).counters().host_to_device.load(), 1024);
  EXPECT_EQ(system->device(0).counters().device_to_host.load(), 1024);
  EXPECT_NE(system->TransferReport().find("IPU 0: host->device 1.00 KiB"),
            std::string::npos)
      << system->TransferReport();
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
  auto v =
      ops::Variable(s.WithOpName("acc"), ops::Const<float>(s, {0, 0}, {2}));
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

// Issue 9: the device layer returns statuses, never aborts, and a failure
// ends one run, not the system.
namespace ipuflow {
namespace {

bool Contains(const absl::Status& s, const std::string& text) {
  return s.message().find(text) != std::string::npos;
}

TEST(DeviceLayerErrorsTest, ConfigSizesAreBoundedNamingFieldAndLimit) {
  struct Case {
    std::function<void(IPUConfig&)> set;
    std::string field, limit;
  };
  const std::vector<Case> cases = {
      {[](IPUConfig& c) { c.set_auto_select_ipus(100000); }, "auto_select_ipus",
       "1024"},
      {[](IPUConfig& c) { c.set_replication_factor(5000); },
       "replication_factor", "1024"},
      {[](IPUConfig& c) { c.set_tiles_per_ipu(2147483647); }, "tiles_per_ipu",
       "65536"},
      {[](IPUConfig& c) { c.set_intra_op_threads_per_ipu(100000); },
       "intra_op_threads_per_ipu", "256"},
      {[](IPUConfig& c) { c.set_memory_per_tile(int64_t{1} << 62); },
       "memory_per_tile", "this machine's"},
      {[](IPUConfig& c) {
         c.set_auto_select_ipus(1024);
         c.set_intra_op_threads_per_ipu(8);
       },
       "auto_select_ipus x (1 + intra_op_threads_per_ipu)", "4096"},
      {[](IPUConfig& c) { c.set_memory_per_tile(-1); }, "memory_per_tile",
       "between 0"},
  };
  auto system = MakeSystem(2);
  for (const Case& c : cases) {
    IPUConfig config;
    c.set(config);
    absl::Status st = IPUSystem::Create(config).status();
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << c.field;
    EXPECT_TRUE(Contains(st, c.field) && Contains(st, c.limit)) << st;
    // A bad config leaves a configured system as it was.
    EXPECT_EQ(system->Configure(config).code(),
              absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(system->num_ipus(), 2);
  }
}

TEST(DeviceLayerErrorsTest, LoadIPUConfigOfADirectoryIsAnError) {
  const std::string dir = std::getenv("TEST_TMPDIR");
  absl::Status st = LoadIPUConfig(dir).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_TRUE(Contains(st, "directory")) << st;
}

// Thread creation failure (a thread limit; injected) is ResourceExhausted
// naming the IPU; the threads already started are joined; the system can
// be configured again once threads are available.
TEST(DeviceLayerErrorsTest, ThreadCreationFailureIsResourceExhausted) {
  IPUConfig config;
  config.set_auto_select_ipus(4);
  config.set_intra_op_threads_per_ipu(1);  // 2 threads per IPU.
  SetThreadLimitForTesting(3);             // IPU 0, then IPU 1's pool only.
  absl::Status st = IPUSystem::Create(config).status();
  SetThreadLimitForTesting(-1);
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted) << st;
  EXPECT_TRUE(Contains(st, "IPU 1 worker")) << st;

  auto system = MakeSystem(2);
  Scope s = Scope::NewRootScope();
  Output y = ops::Add(s, ops::Const(s, 1.0f), ops::Const(s, 2.0f));
  SetThreadLimitForTesting(0);
  st = system->Configure(config);
  SetThreadLimitForTesting(-1);
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted) << st;
  EXPECT_EQ(system->num_ipus(), 0);
  IPUStrategy strategy(system.get());
  st = strategy.Run(*s.graph(), {y}).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
  EXPECT_TRUE(Contains(st, "no IPUs")) << st;
  ASSERT_TRUE(system->Configure(config).ok());
  auto out = strategy.Run(*s.graph(), {y});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorNear((*out)[0], {3, 3, 3, 3}, {4}));

  // A pool without its workers says so and still works, inline.
  SetThreadLimitForTesting(1);
  ThreadPool pool("limited", 3);
  SetThreadLimitForTesting(-1);
  EXPECT_EQ(pool.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(pool.num_threads(), 0);
  std::vector<int> hit(100000, 0);
  pool.ParallelFor(100000, 1000, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) hit[i] += 1;
  });
  EXPECT_EQ(std::count(hit.begin(), hit.end(), 1), 100000);
}

// Memory is checked before it is allocated: 128 TiB of intermediates is
// ResourceExhausted naming the IPU, the budget and the need.
TEST(DeviceLayerErrorsTest, OverBudgetProgramIsRefusedBeforeAllocating) {
  auto system = MakeSystem(1);
  Scope s = Scope::NewRootScope();
  Output big = ops::Fill(s, TensorShape({int64_t{1} << 45}), 1.0);
  IPUStrategy strategy(system.get());
  absl::Status st = strategy.Run(*s.graph(), {ops::ReduceSum(s, big)}).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted) << st;
  EXPECT_TRUE(Contains(st, "IPU 0 (shard 0): 128.00 TiB of 897.00 MiB")) << st;
}

// A fetched output larger than the IPU's memory is ResourceExhausted
// naming the node and the IPU (not an abort, not a host allocation).
TEST(DeviceLayerErrorsTest, FetchLargerThanTheIpuIsResourceExhausted) {
  auto system = MakeSystem(1);
  Scope s = Scope::NewRootScope();
  Output big =
      ops::Fill(s.WithOpName("big"), TensorShape({int64_t{1} << 31}), 1.0);
  IPUStrategy strategy(system.get());
  absl::Status st = strategy.Run(*s.graph(), {big}).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted) << st;
  EXPECT_TRUE(Contains(st, "IPU 0")) << st;
  EXPECT_TRUE(Contains(st, "8589934592")) << st;
}

// A kernel error at step 3 of a device loop reaches the host naming the
// node and the replica; the system runs the next program.
TEST(DeviceLayerErrorsTest, KernelErrorInALoopBodyAtStepK) {
  auto system = MakeSystem(1);
  Scope s = Scope::NewRootScope();
  Output table = ops::Const<float>(s, {10, 20, 30}, {3});
  auto body = [&](const Scope& b, const std::vector<Output>& args) {
    // Reads table[step]: out of range at step 3.
    Output picked = ops::Gather(b.WithOpName("pick"), table, args[0]);
    return std::vector<Output>{
        ops::Add(b, args[0], ops::Const(b, 1.0, DType::kInt32)),
        ops::Add(b, args[1], picked)};
  };
  const std::vector<Output> init = {ops::Const(s, 0.0, DType::kInt32),
                                    ops::Const(s, 0.0f)};
  auto bad = loops::Repeat(s.WithOpName("bad"), 6, body, init);
  auto good = loops::Repeat(s.WithOpName("good"), 3, body, init);
  ASSERT_TRUE(bad.ok() && good.ok());
  IPUStrategy strategy(system.get());
  absl::Status st = strategy.Run(*s.graph(), {bad->outputs[1]}).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_TRUE(Contains(st, "replica 0 (IPU 0)")) << st;
  EXPECT_TRUE(Contains(st, "pick'")) << st;
  EXPECT_TRUE(Contains(st, "= 3 is out of range")) << st;
  auto out = strategy.Run(*s.graph(), {good->outputs[1]});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorNear((*out)[0], {60}, {}));
}

// Replica 1 fails before a collective that replica 0 waits in: replica 0 is
// woken (no hang), Execute returns replica 1's error, and the same
// executable runs correctly next time.
TEST(DeviceLayerErrorsTest, ReplicaErrorWakesTheOthersInACollective) {
  auto system = MakeSystem(2);
  Scope s = Scope::NewRootScope();
  Output k = ops::Placeholder(s.WithOpName("k"), DType::kInt32, {});
  Output idx = ops::Mul(s, ops::ReplicaIndex(s), k);  // Replica 1: k.
  Output picked =
      ops::Gather(s.WithOpName("pick"), ops::Const<float>(s, {1, 2}, {2}), idx);
  Output sum = ops::CrossReplicaSum(s, picked);
  IPUStrategy strategy(system.get());
  absl::Status st =
      strategy.Run(*s.graph(), {sum}, {}, {{k, Tensor::Scalar<int32_t>(5)}})
          .status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_TRUE(Contains(st, "replica 1 (IPU 1)")) << st;
  EXPECT_TRUE(Contains(st, "pick'")) << st;
  auto out =
      strategy.Run(*s.graph(), {sum}, {}, {{k, Tensor::Scalar<int32_t>(1)}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorNear((*out)[0], {3, 3}, {2}));
}

TEST(DeviceLayerErrorsTest, ExecutableCompiledBeforeConfigureRefusesToRun) {
  auto system = MakeSystem(1);
  Scope s = Scope::NewRootScope();
  Output y = ops::Add(s, ops::Const(s, 1.0f), ops::Const(s, 2.0f));
  IPUStrategy strategy(system.get());
  auto exe = strategy.Compile(*s.graph(), {y}, {});
  ASSERT_TRUE(exe.ok());
  ASSERT_TRUE(system->Configure(system->config()).ok());
  std::vector<std::vector<Tensor>> out;
  absl::Status st = (*exe)->Execute({{}}, &out);
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
  EXPECT_TRUE(Contains(st, "reconfigured")) << st;
}

// A two-replica program whose replica 1 waits behind `blocker` on IPU 1
// while replica 0 waits in the all-reduce: a run that only a cancellation
// ends early.
struct BlockedRun {
  std::unique_ptr<IPUSystem> system = MakeSystem(2);
  Scope s = Scope::NewRootScope();
  Output sum = ops::CrossReplicaSum(s, ops::Const(s, 1.0f));
  std::unique_ptr<DeviceProgram> program;
  Notification release;
  absl::Status status;
  std::vector<std::vector<Tensor>> out;
  std::thread runner;

  BlockedRun() {
    ProgramSpec spec;
    spec.fetches = {sum};
    program = std::move(DeviceProgram::Compile(system.get(), *s.graph(), spec))
                  .value();
  }
  void Start() {
    system->device(1).Submit([this] { release.WaitForNotification(); });
    DeviceProgram* p = program.get();
    runner = std::thread([this, p] { status = p->Execute({{}}, &out); });
    while (system->runs_in_progress() == 0) std::this_thread::yield();
  }
};

TEST(DeviceLayerErrorsTest, CancelWakesARunInProgressAndTheNextRunWorks) {
  BlockedRun run;
  run.Start();
  run.program->Cancel(absl::CancelledError("stopped by the test"));
  run.release.Notify();
  run.runner.join();
  EXPECT_EQ(run.status.code(), absl::StatusCode::kCancelled) << run.status;
  EXPECT_TRUE(Contains(run.status, "stopped by the test")) << run.status;
  ASSERT_TRUE(run.program->Execute({{}}, &run.out).ok());
  EXPECT_TRUE(TensorNear(run.out[1][0], {2}, {}));
}

TEST(DeviceLayerErrorsTest, DestroyingTheSystemCancelsAndWaitsForARun) {
  BlockedRun run;
  run.Start();
  IPUSystem* system = run.system.release();
  std::thread destroyer([system] { delete system; });
  // The destructor cancels first, then waits for the run to end.
  while (!system->cancellation()->cancelled()) std::this_thread::yield();
  run.release.Notify();
  destroyer.join();
  run.runner.join();
  EXPECT_EQ(run.status.code(), absl::StatusCode::kCancelled) << run.status;
  EXPECT_TRUE(Contains(run.status, "IPU system destroyed")) << run.status;
}

TEST(DeviceLayerErrorsTest, DestroyingAnExecutableWhileItRunsWaits) {
  BlockedRun run;
  run.Start();
  std::thread destroyer([&run] { run.program.reset(); });
  run.release.Notify();
  destroyer.join();
  run.runner.join();
  // Cancelled if the destructor came first, else the run finished: never a
  // use after free (ASan).
  EXPECT_TRUE(run.status.ok() || Contains(run.status, "executable destroyed"))
      << run.status;
}

TEST(DeviceLayerErrorsTest, SecondConcurrentExecuteIsRefused) {
  BlockedRun run;
  run.Start();
  std::vector<std::vector<Tensor>> out;
  absl::Status st = run.program->Execute({{}}, &out);
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
  EXPECT_TRUE(Contains(st, "already running")) << st;
  run.release.Notify();
  run.runner.join();
  EXPECT_TRUE(run.status.ok()) << run.status;
}

}  // namespace
}  // namespace ipuflow
