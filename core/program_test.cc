// The compiler and executor: pruning, memory planning, parallel execution,
// compile caching, and the errors a user meets at Session::Run.
#include "core/program.h"

#include <chrono>
#include <memory>
#include <thread>

#include "core/mutex.h"
#include "core/op_registry.h"
#include "core/session.h"
#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/array/fill.h"
#include "ops/array/gather.h"
#include "ops/array/identity.h"
#include "ops/array/reshape.h"
#include "ops/math/add.h"
#include "ops/math/add_n.h"
#include "ops/math/reduce_sum.h"
#include "ops/shape_fns.h"
#include "ops/state/assign.h"
#include "ops/state/variable.h"

namespace ipuflow {
namespace {

using ::ipuflow::testing::TensorNear;

// IPUs for RunEnv::post_to_shard: a worker thread and a ResourceMgr per
// shard; shard 0 is the caller's.
class ShardThreads {
 public:
  explicit ShardThreads(int shards) : intra_("intra", 0), resources_(shards) {
    for (int k = 0; k < shards; ++k) {
      workers_.push_back(
          std::make_unique<ThreadPool>("shard" + std::to_string(k), 1));
      envs_.emplace_back();
      envs_[k].intra_op = &intra_;
      envs_[k].resources = &resources_[k];
      envs_[k].ipu = k;
    }
  }
  // The env to run programs with; `posted`: shard runs go to the workers.
  RunEnv& env(bool posted) {
    RunEnv& e = envs_[0];
    e.post_to_shard = nullptr;
    e.on_shard = nullptr;
    if (posted) {
      e.post_to_shard = [this](int shard, std::function<void(RunEnv&)> work,
                               std::function<void()> done) {
        workers_[shard]->Schedule([this, shard, work, done] {
          work(envs_[shard]);
          done();
        });
      };
    } else {
      e.on_shard = [this](int shard, const std::function<void(RunEnv&)>& work) {
        work(envs_[shard]);
      };
    }
    return e;
  }

 private:
  ThreadPool intra_;
  std::vector<ResourceMgr> resources_;
  std::vector<RunEnv> envs_;
  std::vector<std::unique_ptr<ThreadPool>> workers_;
};

// Test kernels: "ShardRunsTestSignal" (y = x) notifies `started`;
// "ShardRunsTestWait" (y = x) returns once it has, or fails after a minute:
// on the emulated IPUs of posted shard runs, two independent runs overlap.
Notification* started = nullptr;

REGISTER_OP("ShardRunsTestSignal")
    .Input("x")
    .SetShapeFn(ops::shape_fns::Unchanged)
    .SetKernel([](KernelContext& ctx) {
      started->Notify();
      ctx.set_output(0, ctx.input(0));
      return absl::OkStatus();
    });

REGISTER_OP("ShardRunsTestWait")
    .Input("x")
    .SetShapeFn(ops::shape_fns::Unchanged)
    .SetKernel([](KernelContext& ctx) {
      for (int i = 0; i < 600 && !started->HasBeenNotified(); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      if (!started->HasBeenNotified()) {
        return absl::DeadlineExceededError(
            "the other shard's run never started");
      }
      ctx.set_output(0, ctx.input(0));
      return absl::OkStatus();
    });

TEST(ProgramTest, PrunesWhatFetchesDoNotNeed) {
  Scope s = Scope::NewRootScope();
  Output a = ops::Const(s.WithOpName("a"), 1.0f);
  Output b = ops::Add(s.WithOpName("b"), a, a);
  ops::Add(s.WithOpName("unused"), a, a);
  ProgramSpec spec;
  spec.fetches = {b};
  auto p = Program::Compile(*s.graph(), spec);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ((*p)->NodeNamesInOrder(), (std::vector<std::string>{"a", "b"}));
}

TEST(ProgramTest, FeedCutsTheGraph) {
  Scope s = Scope::NewRootScope();
  Output x = ops::Placeholder(s.WithOpName("x"), DType::kFloat32, {2});
  Output y = ops::Add(s.WithOpName("y"), x, x);
  Output z = ops::Add(s.WithOpName("z"), y, x);
  Session session(s.graph());
  std::vector<Tensor> out;
  // Feeding y makes x unnecessary for z... except z reads x too.
  ASSERT_TRUE(session
                  .Run({{y, Tensor::FromVector<float>({10, 20})},
                        {x, Tensor::FromVector<float>({1, 2})}},
                       {z}, &out)
                  .ok());
  EXPECT_TRUE(TensorNear(out[0], {11, 22}, {2}));
}

TEST(ProgramTest, ChainReusesMemoryByLiveness) {
  Scope s = Scope::NewRootScope();
  Output x = ops::Placeholder(s, DType::kFloat32, {1024});
  Output v = x;
  for (int i = 0; i < 20; ++i) v = ops::Add(s, v, x);
  ProgramSpec spec;
  spec.feeds = {x};
  spec.feed_shapes = {TensorShape({1024})};
  spec.fetches = {ops::Identity(s, v)};
  auto p = Program::Compile(*s.graph(), spec);
  ASSERT_TRUE(p.ok()) << p.status();
  const MemoryPlan& m = (*p)->memory();
  // 19 intermediates (the last is fetched through Identity... which aliases
  // it, so it is fetched and unplanned): at most two live at once.
  EXPECT_EQ(m.unplanned_bytes, 19 * 4096);
  EXPECT_EQ(m.peak_bytes, 2 * 4096) << m.DebugString();
}

TEST(ProgramTest, FetchesSurviveTheNextRun) {
  Scope s = Scope::NewRootScope();
  Output x = ops::Placeholder(s, DType::kFloat32, {2});
  Output y = ops::Add(s, ops::Add(s, x, x), x);
  Output z = ops::Reshape(s, y, {2, 1});  // Aliases y.
  Session session(s.graph());
  std::vector<Tensor> first, second;
  ASSERT_TRUE(
      session.Run({{x, Tensor::FromVector<float>({1, 2})}}, {z}, &first).ok());
  ASSERT_TRUE(
      session.Run({{x, Tensor::FromVector<float>({5, 6})}}, {z}, &second).ok());
  EXPECT_TRUE(TensorNear(first[0], {3, 6}, {2, 1}));
  EXPECT_TRUE(TensorNear(second[0], {15, 18}, {2, 1}));
}

// A wide graph: 64 independent branches, each a chain, summed at the end.
Output WideGraph(const Scope& s, Output x, int branches, int depth) {
  std::vector<Output> ends;
  for (int b = 0; b < branches; ++b) {
    Output v = ops::Add(s, x, ops::Const(s, static_cast<float>(b)));
    for (int d = 0; d < depth; ++d) v = ops::Add(s, v, x);
    ends.push_back(v);
  }
  return ops::AddN(s, ends);
}

TEST(ProgramTest, ParallelExecutionMatchesSequential) {
  Scope s = Scope::NewRootScope();
  Output x = ops::Placeholder(s, DType::kFloat32, {256});
  Output y = WideGraph(s, x, 64, 8);
  Tensor xv = ::ipuflow::testing::RandomTensor({256}, -1, 1, 3);
  SessionOptions seq_opts;
  seq_opts.inter_op_threads = 0;
  SessionOptions par_opts;
  par_opts.inter_op_threads = 4;
  Session seq(s.graph(), seq_opts), par(s.graph(), par_opts);
  std::vector<Tensor> a, b;
  ASSERT_TRUE(seq.Run({{x, xv}}, {y}, &a).ok());
  for (int run = 0; run < 50; ++run) {
    ASSERT_TRUE(par.Run({{x, xv}}, {y}, &b).ok());
    ASSERT_TRUE(TensorNear(b[0], a[0], 0, 0)) << "run " << run;
  }
}

// Posted shard runs (a pipeline's weight update): IPUs whose runs do not
// depend on each other work at once. The waiting node comes first in the
// schedule, so running the shards one at a time could not finish.
TEST(ProgramTest, PostedShardRunsOfIndependentIpusOverlap) {
  Notification note;
  started = &note;
  Scope s = Scope::NewRootScope();
  Output x = ops::Placeholder(s.WithOpName("x"), DType::kFloat32, {2});
  Output w = s.WithIpu(1).AddNode("ShardRunsTestWait", {x});
  Output g = s.WithIpu(2).AddNode("ShardRunsTestSignal", {x});
  Output y = ops::Add(s.WithOpName("y"), w, g);
  ASSERT_TRUE(s.ok()) << s.status();
  ProgramSpec spec;
  spec.feeds = {x};
  spec.feed_shapes = {TensorShape({2})};
  spec.fetches = {y};
  auto p = Program::Compile(*s.graph(), spec);
  ASSERT_TRUE(p.ok()) << p.status();
  ShardThreads ipus(3);
  std::vector<Tensor> out;
  ASSERT_TRUE((*p)->Run(ipus.env(/*posted=*/true),
                        {Tensor::FromVector<float>({1, 2})}, &out)
                  .ok());
  EXPECT_TRUE(TensorNear(out[0], {2, 4}, {2}));
  started = nullptr;
}

// Posted shard runs give what one run after another gives: values crossing
// IPUs, variables read and updated on their IPUs, arena bytes reused.
TEST(ProgramTest, PostedShardRunsMatchSequentialRuns) {
  Scope s = Scope::NewRootScope();
  Output x = ops::Placeholder(s.WithOpName("x"), DType::kFloat32, {64});
  std::vector<ops::VariableHandle> vars;
  std::vector<Node*> updates;
  std::vector<Output> reads;
  Output carry = x;
  for (int k = 0; k < 4; ++k) {
    const Scope ipu = s.WithIpu(k);
    vars.push_back(ops::Variable(ipu.WithOpName("v" + std::to_string(k)),
                                 ops::Fill(ipu, {64}, 0.5f * (k + 1))));
    // Intermediates whose arena bytes later nodes of the IPU reuse.
    Output a = ops::Add(ipu, carry, vars[k].value);
    Output b = ops::Add(ipu, a, a);
    Output c = ops::AddN(ipu, {b, a, carry});
    updates.push_back(ops::AssignAdd(ipu, vars[k].handle, c));
    reads.push_back(ops::ReduceSum(ipu, c, {0}));
    carry = b;
  }
  Output total = ops::AddN(s.WithOpName("total"), reads);
  ASSERT_TRUE(s.ok()) << s.status();
  ProgramSpec init_spec, spec;
  for (const auto& v : vars) init_spec.targets.push_back(v.initializer);
  spec.feeds = {x};
  spec.feed_shapes = {TensorShape({64})};
  spec.fetches = {total, carry};
  spec.targets = updates;
  auto init = Program::Compile(*s.graph(), init_spec);
  auto p = Program::Compile(*s.graph(), spec);
  ASSERT_TRUE(init.ok()) << init.status();
  ASSERT_TRUE(p.ok()) << p.status();
  const Tensor xv = ::ipuflow::testing::RandomTensor({64}, -1, 1, 5);
  std::vector<std::vector<Tensor>> results;
  for (bool posted : {false, true}) {
    ShardThreads ipus(4);
    ASSERT_TRUE((*init)->Run(ipus.env(posted), {}, nullptr).ok());
    std::vector<Tensor> out;
    for (int run = 0; run < 20; ++run) {
      ASSERT_TRUE((*p)->Run(ipus.env(posted), {xv}, &out).ok()) << run;
      results.push_back(out);
    }
  }
  for (int run = 0; run < 20; ++run) {
    for (int i = 0; i < 2; ++i) {
      EXPECT_TRUE(TensorNear(results[20 + run][i], results[run][i], 0, 0))
          << "run " << run << " fetch " << i;
    }
  }
}

// An error in a posted run stops the run: the earliest failing run's error,
// and the program runs again.
TEST(ProgramTest, PostedShardRunErrorIsReturnedAndTheProgramRunsAgain) {
  Scope s = Scope::NewRootScope();
  Output idx = ops::Placeholder(s.WithOpName("idx"), DType::kInt32, {});
  Output g = ops::Gather(s.WithOpName("pick").WithIpu(1),
                         ops::Const<float>(s.WithIpu(1), {1, 2, 3}, {3}), idx);
  Output h = ops::Add(s.WithOpName("h").WithIpu(2), g, g);
  Output y = ops::Add(s.WithOpName("y"), h, g);
  ASSERT_TRUE(s.ok()) << s.status();
  ProgramSpec spec;
  spec.feeds = {idx};
  spec.feed_shapes = {TensorShape()};
  spec.fetches = {y};
  auto p = Program::Compile(*s.graph(), spec);
  ASSERT_TRUE(p.ok()) << p.status();
  ShardThreads ipus(3);
  std::vector<Tensor> out;
  absl::Status st =
      (*p)->Run(ipus.env(true), {Tensor::Scalar<int32_t>(7)}, &out);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_NE(st.message().find("pick"), std::string::npos) << st;
  ASSERT_TRUE(
      (*p)->Run(ipus.env(true), {Tensor::Scalar<int32_t>(2)}, &out).ok());
  EXPECT_TRUE(TensorNear(out[0], {9}, {}));
}

TEST(ProgramTest, KernelErrorStopsTheRunInBothModes) {
  Scope s = Scope::NewRootScope();
  Output x = ops::Placeholder(s, DType::kFloat32, {-1});
  Output y = ops::Placeholder(s, DType::kFloat32, {-1});
  Output bad = ops::AddN(s.WithOpName("sum"), {WideGraph(s, x, 8, 2), y});
  for (int threads : {0, 4}) {
    SessionOptions opts;
    opts.inter_op_threads = threads;
    Session session(s.graph(), opts);
    std::vector<Tensor> out;
    absl::Status st = session.Run({{x, Tensor::FromVector<float>({1, 2})},
                                   {y, Tensor::FromVector<float>({1, 2, 3})}},
                                  {bad}, &out);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
    EXPECT_NE(st.message().find("AddN 'sum'"), std::string::npos) << st;
  }
}

TEST(SessionTest, MissingFeedNamesThePlaceholder) {
  Scope s = Scope::NewRootScope();
  Output x = ops::Placeholder(s.WithOpName("images"), DType::kFloat32, {-1, 4});
  Output y = ops::Add(s.WithOpName("y"), x, x);
  Session session(s.graph());
  std::vector<Tensor> out;
  absl::Status st = session.Run({}, {y}, &out);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("Placeholder 'images' needs a value"),
            std::string::npos)
      << st;
  EXPECT_NE(st.message().find("'y:0'"), std::string::npos) << st;
}

TEST(SessionTest, WrongDTypeAndShapeAreNamed) {
  Scope s = Scope::NewRootScope();
  Output x = ops::Placeholder(s.WithOpName("x"), DType::kFloat32, {-1, 4});
  Output y = ops::Add(s, x, x);
  Session session(s.graph());
  std::vector<Tensor> out;
  absl::Status st = session.Run(
      {{x, Tensor::FromVector<int32_t>({1, 2, 3, 4}, {1, 4})}}, {y}, &out);
  EXPECT_NE(st.message().find("is int32 but Placeholder 'x' is float32"),
            std::string::npos)
      << st;
  st = session.Run({{x, Tensor::FromVector<float>({1, 2, 3}, {1, 3})}}, {y},
                   &out);
  EXPECT_NE(
      st.message().find("has shape [1,3] but Placeholder 'x' expects [?,4]"),
      std::string::npos)
      << st;
}

TEST(SessionTest, CompilesOncePerSignature) {
  Scope s = Scope::NewRootScope();
  Output x = ops::Placeholder(s, DType::kFloat32, {-1});
  Output y = ops::Add(s, x, x);
  Session session(s.graph());
  std::vector<Tensor> out;
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(
        session.Run({{x, Tensor::FromVector<float>({1, 2})}}, {y}, &out).ok());
  }
  EXPECT_EQ(session.num_compiles(), 1);
  ASSERT_TRUE(
      session.Run({{x, Tensor::FromVector<float>({1, 2, 3})}}, {y}, &out).ok());
  EXPECT_EQ(session.num_compiles(), 2);
  EXPECT_TRUE(TensorNear(out[0], {2, 4, 6}, {3}));
}

TEST(SessionTest, ConcurrentRunsFromManyThreads) {
  Scope s = Scope::NewRootScope();
  Output x = ops::Placeholder(s, DType::kFloat32, {128});
  Output y = WideGraph(s, x, 16, 4);
  SessionOptions opts;
  opts.inter_op_threads = 2;
  Session session(s.graph(), opts);
  Tensor xv = ::ipuflow::testing::RandomTensor({128}, -1, 1, 5);
  std::vector<Tensor> expected;
  ASSERT_TRUE(session.Run({{x, xv}}, {y}, &expected).ok());
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 25; ++i) {
        std::vector<Tensor> out;
        if (!session.Run({{x, xv}}, {y}, &out).ok() ||
            !TensorNear(out[0], expected[0], 0, 0)) {
          ++failures;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
}

// Issue 9: a fetched output gets memory of its own when the kernel runs;
// one larger than the machine is ResourceExhausted naming the node.
TEST(ProgramTest, FetchTooLargeForTheMachineIsResourceExhausted) {
  Scope s = Scope::NewRootScope();
  Output big =
      ops::Fill(s.WithOpName("big"), TensorShape({int64_t{1} << 45}), 1.0);
  Session session(s.graph());
  std::vector<Tensor> out;
  absl::Status st = session.Run({}, {big}, &out);
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted) << st;
  EXPECT_NE(st.message().find("Fill 'big': output 0 float32[35184372088832] "
                              "needs 140737488355328 bytes, more than the "
                              "host's physical memory"),
            std::string::npos)
      << st;
}

// Issue 9: a session whose pool could not start its workers says so on
// Run (ResourceExhausted) instead of running inline without a word.
TEST(SessionTest, ThreadPoolThatCouldNotStartIsAnErrorOnRun) {
  Scope s = Scope::NewRootScope();
  Output one = ops::Const(s, 1.0f);
  SetThreadLimitForTesting(0);
  SessionOptions options;
  options.intra_op_threads = 2;
  Session session(s.graph(), options);
  SetThreadLimitForTesting(-1);
  std::vector<Tensor> out;
  absl::Status st = session.Run({}, {one}, &out);
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted) << st;
  EXPECT_NE(st.message().find("session-intra-op"), std::string::npos) << st;
}

// Issue 9: compiling allocates nothing; the first run allocates the arena
// and reports a machine that cannot hold it as ResourceExhausted.
TEST(ProgramTest, ArenaTooLargeForTheMachineIsResourceExhausted) {
  Scope s = Scope::NewRootScope();
  // 2^45 floats = 128 TiB of intermediates (a valid shape, no machine).
  Output big =
      ops::Fill(s.WithOpName("big"), TensorShape({int64_t{1} << 45}), 1.0);
  Output sum = ops::ReduceSum(s.WithOpName("sum"), big);
  ProgramSpec spec;
  spec.fetches = {sum};
  auto p = Program::Compile(*s.graph(), spec);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_GE((*p)->memory().peak_bytes, int64_t{1} << 47);
  Session session(s.graph());
  std::vector<Tensor> out;
  absl::Status st = session.Run({}, {sum}, &out);
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted) << st;
  EXPECT_NE(st.message().find("140737488355328 bytes"), std::string::npos)
      << st;
  // The session still runs what fits.
  Output small = ops::ReduceSum(s, ops::Fill(s, TensorShape({4}), 2.0));
  ASSERT_TRUE(session.Run({}, {small}, &out).ok());
  EXPECT_TRUE(TensorNear(out[0], {8}, {}));
}

// Refused when built (graph.cc) and, for graphs that bypass the builder,
// when compiled (compiler/node_order.cc): never a per-shard table of 2^31.
TEST(ProgramTest, NodeOnAnIpuOutOfRangeIsAnError) {
  for (int ipu : {2147483647, 1024, -2}) {
    Scope s = Scope::NewRootScope();
    Output a = ops::Const(s.WithOpName("a").WithIpu(ipu), 1.0f);
    ProgramSpec spec;
    spec.fetches = {ops::Add(s.WithOpName("b"), a, a)};
    auto p = Program::Compile(*s.graph(), spec);
    ASSERT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument) << ipu;
    const std::string text = std::string(s.status().message()) + " | " +
                             std::string(p.status().message());
    EXPECT_NE(text.find("IPU " + std::to_string(ipu)), std::string::npos)
        << text;
  }
}

// A node without outputs (a variable update) as the last node: the executor
// must not form a reference past its values (UBSan).
TEST(ProgramTest, NodesWithoutOutputsRunEveryTime) {
  Scope s = Scope::NewRootScope();
  ops::VariableHandle v = ops::Variable(s.WithOpName("v"), ops::Const(s, 0.0f));
  Node* inc = ops::AssignAdd(s, v.handle, ops::Const(s, 1.0f));
  Session session(s.graph());
  std::vector<Tensor> out;
  // Running before initialising is a status naming the variable.
  absl::Status st = session.Run({}, {v.value}, &out);
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
  EXPECT_NE(st.message().find("'v"), std::string::npos) << st;
  ASSERT_TRUE(session.Initialize().ok());
  ASSERT_TRUE(session.Initialize().ok());  // Initialising again resets.
  for (int i = 0; i < 3; ++i)
    ASSERT_TRUE(session.Run({}, {}, {inc}, nullptr).ok());
  ASSERT_TRUE(session.Run({}, {v.value}, &out).ok());
  EXPECT_TRUE(TensorNear(out[0], {3}, {}));
}

// A kernel error names the node; the same program runs again afterwards.
TEST(ProgramTest, KernelErrorNamesTheNodeAndTheProgramRunsAgain) {
  Scope s = Scope::NewRootScope();
  Output idx = ops::Placeholder(s.WithOpName("idx"), DType::kInt32, {});
  Output g = ops::Gather(s.WithOpName("pick"),
                         ops::Const<float>(s, {1, 2, 3}, {3}), idx);
  Session session(s.graph());
  std::vector<Tensor> out;
  absl::Status st = session.Run({{idx, Tensor::Scalar<int32_t>(7)}}, {g}, &out);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("'pick'"), std::string::npos) << st;
  ASSERT_TRUE(session.Run({{idx, Tensor::Scalar<int32_t>(2)}}, {g}, &out).ok());
  EXPECT_TRUE(TensorNear(out[0], {3}, {}));
}

}  // namespace
}  // namespace ipuflow
