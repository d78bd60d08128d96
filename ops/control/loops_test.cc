#include "ops/control/loops.h"

#include <algorithm>

#include "core/ipu/ipu_strategy.h"
#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/array/fill.h"
#include "ops/math/add.h"
#include "ops/math/cast.h"
#include "ops/math/less.h"
#include "ops/math/mat_mul.h"
#include "ops/math/mul.h"
#include "ops/math/reduce_sum.h"
#include "ops/nn/bias_add.h"
#include "ops/nn/relu.h"
#include "ops/state/assign.h"
#include "ops/state/variable.h"

namespace ipuflow::loops {
namespace {

using ::ipuflow::testing::RunOne;
using ::ipuflow::testing::TensorNear;

TEST(RepeatTest, CarriesValuesAndCapturesInvariants) {
  Scope s = Scope::NewRootScope();
  Output step = ops::Const(s, 2.0f);  // Captured from outside the body.
  auto loop = Repeat(s, 10,
                     [&](const Scope& b, const std::vector<Output>& a) {
                       return std::vector<Output>{
                           ops::Add(b, a[0], step),
                           ops::Mul(b, a[1], ops::Const(b, 2.0f))};
                     },
                     {ops::Const(s, 0.0f), ops::Const(s, 1.0f)});
  ASSERT_TRUE(loop.ok()) << loop.status();
  EXPECT_TRUE(TensorNear(RunOne(s, {}, loop->outputs[0]), {20}, {}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, loop->outputs[1]), {1024}, {}));
}

TEST(RepeatTest, VariableUpdatesPersistAcrossIterationsAndRuns) {
  Scope s = Scope::NewRootScope();
  ops::VariableHandle counter =
      ops::Variable(s.WithOpName("counter"), ops::Const(s, 0.0f));
  auto loop = Repeat(s, 10, [&](const Scope& b, const std::vector<Output>&) {
    ops::AssignAdd(b, counter.handle, ops::Const(b, 1.0f));
    return std::vector<Output>{};
  });
  ASSERT_TRUE(loop.ok()) << loop.status();
  EXPECT_TRUE(loop->outputs.empty());
  Session session(s.graph());
  ASSERT_TRUE(session.Initialize().ok());
  std::vector<Tensor> out;
  ASSERT_TRUE(session.Run({}, {}, {loop->op}, nullptr).ok());
  ASSERT_TRUE(session.Run({}, {}, {loop->op}, nullptr).ok());
  ASSERT_TRUE(session.Run({}, {counter.value}, &out).ok());
  EXPECT_TRUE(TensorNear(out[0], {20}, {}));
}

TEST(RepeatTest, NestedLoopBodiesRunOnlyInTheirLoop) {
  // 3 outer iterations x 2 inner ones: 6 increments (the outer body must not
  // also run the inner body's AssignAdd itself).
  Scope s = Scope::NewRootScope();
  ops::VariableHandle counter =
      ops::Variable(s.WithOpName("counter"), ops::Const(s, 0.0f));
  auto loop = Repeat(s, 3, [&](const Scope& b, const std::vector<Output>&) {
    auto inner = Repeat(b, 2, [&](const Scope& c, const std::vector<Output>&) {
      ops::AssignAdd(c, counter.handle, ops::Const(c, 1.0f));
      return std::vector<Output>{};
    });
    EXPECT_TRUE(inner.ok()) << inner.status();
    return std::vector<Output>{};
  });
  ASSERT_TRUE(loop.ok()) << loop.status();
  Session session(s.graph());
  ASSERT_TRUE(session.Initialize().ok());
  std::vector<Tensor> out;
  ASSERT_TRUE(session.Run({}, {}, {loop->op}, nullptr).ok());
  ASSERT_TRUE(session.Run({}, {counter.value}, &out).ok());
  EXPECT_TRUE(TensorNear(out[0], {6}, {}));
}

// Loops `depth` deep, each running once, the innermost adding 1 to x.
Output Nest(const Scope& s, int depth, Output x) {
  auto loop = Repeat(s, 1,
                     [depth](const Scope& b, const std::vector<Output>& a) {
                       return std::vector<Output>{
                           depth == 1 ? ops::Add(b, a[0], ops::Const(b, 1.0f))
                                      : Nest(b, depth - 1, a[0])};
                     },
                     {x});
  EXPECT_TRUE(loop.ok()) << loop.status();
  return loop.ok() ? loop->outputs[0] : Output();
}

// Issue 9: nesting is bounded (each level compiles and runs its body from
// inside its own kernel, on one stack): 64 levels run, 65 are refused.
TEST(RepeatTest, NestingDepthIsBounded) {
  Scope s = Scope::NewRootScope();
  Output ok = Nest(s, 63, ops::Const(s, 0.0f));  // The top program is 64th.
  EXPECT_TRUE(TensorNear(RunOne(s, {}, ok), {1}, {}));
  Scope t = Scope::NewRootScope();
  Output deep = Nest(t, 200, ops::Const(t, 0.0f));
  Session session(t.graph());
  std::vector<Tensor> out;
  absl::Status st = session.Run({}, {deep}, &out);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_NE(st.message().find("nested more than 64 deep"), std::string::npos)
      << st;
}

TEST(RepeatTest, RunsOnAnEmulatedIpu) {
  IPUConfig config;
  auto system = IPUSystem::Create(config);
  ASSERT_TRUE(system.ok());
  Scope s = Scope::NewRootScope();
  auto loop = Repeat(
      s, 1000,
      [&](const Scope& b, const std::vector<Output>& a) {
        return std::vector<Output>{ops::Add(b, a[0], ops::Const(b, 1.0f))};
      },
      {ops::Const(s, 0.0f)});
  ASSERT_TRUE(loop.ok());
  IPUStrategy strategy(system->get());
  auto out = strategy.Run(*s.graph(), loop->outputs);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorNear((*out)[0], {1000}, {}));
}

TEST(RepeatTest, BodyOutputMismatchIsAnError) {
  Scope s = Scope::NewRootScope();
  auto wrong_count = Repeat(s, 2,
                            [&](const Scope& b, const std::vector<Output>& a) {
                              return std::vector<Output>{a[0], a[0]};
                            },
                            {ops::Const(s, 0.0f)});
  EXPECT_EQ(wrong_count.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(wrong_count.status().message().find(
                "returns 2 value(s) but the loop carries 1"),
            std::string::npos)
      << wrong_count.status();

  Scope s2 = Scope::NewRootScope();
  auto wrong_type =
      Repeat(s2, 2,
             [&](const Scope& b, const std::vector<Output>& a) {
               return std::vector<Output>{ops::Const<float>(b, {1, 2}, {2})};
             },
             {ops::Const(s2, 0.0f)});
  EXPECT_NE(wrong_type.status().message().find(
                "mismatch between input types and output types for loop body: "
                "output 0 is float32[2] but input 0 is float32[]"),
            std::string::npos)
      << wrong_type.status();
}

// x = 1; while (x < 100) x *= 3;  -> 243 after 5 iterations, 6 conditions.
absl::StatusOr<Loop> TriplesBelow100(const Scope& s) {
  return WhileLoop(
      s,
      [&](const Scope& c, const std::vector<Output>& a) {
        return ops::Less(c, a[0], ops::Const(c, 100.0f));
      },
      [&](const Scope& b, const std::vector<Output>& a) {
        return std::vector<Output>{ops::Mul(b, a[0], ops::Const(b, 3.0f))};
      },
      {ops::Const(s, 1.0f)});
}

TEST(WhileLoopTest, StopsWhenConditionFails) {
  Scope s = Scope::NewRootScope();
  auto loop = TriplesBelow100(s);
  ASSERT_TRUE(loop.ok()) << loop.status();
  EXPECT_TRUE(TensorNear(RunOne(s, {}, loop->outputs[0]), {243}, {}));
}

TEST(WhileLoopTest, MaximumIterationsBoundsTheLoop) {
  Scope s = Scope::NewRootScope();
  auto loop = WhileLoop(
      s,
      [&](const Scope& c, const std::vector<Output>& a) {
        return ops::Less(c, a[0], ops::Const(c, 1e9f));
      },
      [&](const Scope& b, const std::vector<Output>& a) {
        return std::vector<Output>{ops::Add(b, a[0], ops::Const(b, 1.0f))};
      },
      {ops::Const(s, 0.0f)}, nullptr, /*maximum_iterations=*/7);
  ASSERT_TRUE(loop.ok()) << loop.status();
  EXPECT_TRUE(TensorNear(RunOne(s, {}, loop->outputs[0]), {7}, {}));
}

TEST(WhileLoopTest, ConditionMustBeABoolScalar) {
  Scope s = Scope::NewRootScope();
  auto loop = WhileLoop(
      s, [&](const Scope& c, const std::vector<Output>& a) { return a[0]; },
      [&](const Scope& b, const std::vector<Output>& a) { return a; },
      {ops::Const(s, 0.0f)});
  EXPECT_NE(loop.status().message().find("must return a bool scalar"),
            std::string::npos)
      << loop.status();
}

absl::StatusOr<std::unique_ptr<Program>> CompileFetching(const Scope& s,
                                                         Output fetch);

// What a Program needs to run on the host (no variables).
struct HostEnv {
  HostEnv() { env.intra_op = &pool; }
  ThreadPool pool{"loops_test", 0};
  RunEnv env;
};

// One compile per frame: the body the compiler plans is the body that runs.
// Program::CompileCount counts every compile in the process; each test reads
// the difference. A body compiled again by its kernel would show up as one
// more compile and as a planned body that never ran.
TEST(LoopCompileTest, ARepeatBodyIsCompiledOnceAndThePlannedBodyRuns) {
  Scope s = Scope::NewRootScope();
  auto loop = Repeat(
      s, 5,
      [&](const Scope& b, const std::vector<Output>& a) {
        return std::vector<Output>{ops::Add(b, a[0], ops::Const(b, 1.0f))};
      },
      {ops::Const(s, 0.0f)});
  ASSERT_TRUE(loop.ok()) << loop.status();
  const int64_t before = Program::CompileCount();
  auto program = CompileFetching(s, loop->outputs[0]);
  ASSERT_TRUE(program.ok()) << program.status();
  EXPECT_EQ(Program::CompileCount() - before, 2);  // The step and the body.
  const Program* body = (*program)->sub_program(loop->op, "body");
  ASSERT_NE(body, nullptr);
  EXPECT_EQ((*program)->sub_program(loop->op, "cond"), nullptr);
  HostEnv host;
  RunEnv& env = host.env;
  std::vector<Tensor> out;
  ASSERT_TRUE((*program)->Run(env, {}, &out).ok());
  ASSERT_TRUE((*program)->Run(env, {}, &out).ok());
  EXPECT_TRUE(TensorNear(out[0], {5}, {}));
  EXPECT_EQ(Program::CompileCount() - before, 2);
  EXPECT_EQ(body->runs(), 2u * 5u);
}

TEST(LoopCompileTest, AWhileLoopCompilesBodyAndConditionOnce) {
  Scope s = Scope::NewRootScope();
  auto loop = TriplesBelow100(s);
  ASSERT_TRUE(loop.ok()) << loop.status();
  const int64_t before = Program::CompileCount();
  auto program = CompileFetching(s, loop->outputs[0]);
  ASSERT_TRUE(program.ok()) << program.status();
  HostEnv host;
  RunEnv& env = host.env;
  std::vector<Tensor> out;
  ASSERT_TRUE((*program)->Run(env, {}, &out).ok());
  EXPECT_TRUE(TensorNear(out[0], {243}, {}));
  EXPECT_EQ(Program::CompileCount() - before, 3);
  // 1 -> 3 -> ... -> 243: five bodies, six conditions.
  EXPECT_EQ((*program)->sub_program(loop->op, "body")->runs(), 5u);
  EXPECT_EQ((*program)->sub_program(loop->op, "cond")->runs(), 6u);
}

TEST(LoopCompileTest, NestedBodiesAreCompiledOnceEach) {
  Scope s = Scope::NewRootScope();
  Node* inner_op = nullptr;
  auto loop = Repeat(s, 3,
                     [&](const Scope& b, const std::vector<Output>& a) {
                       auto inner = Repeat(
                           b, 2,
                           [&](const Scope& c, const std::vector<Output>& x) {
                             return std::vector<Output>{
                                 ops::Add(c, x[0], ops::Const(c, 1.0f))};
                           },
                           {a[0]});
                       EXPECT_TRUE(inner.ok()) << inner.status();
                       inner_op = inner->op;
                       return std::vector<Output>{inner->outputs[0]};
                     },
                     {ops::Const(s, 0.0f)});
  ASSERT_TRUE(loop.ok()) << loop.status();
  const int64_t before = Program::CompileCount();
  auto program = CompileFetching(s, loop->outputs[0]);
  ASSERT_TRUE(program.ok()) << program.status();
  HostEnv host;
  RunEnv& env = host.env;
  std::vector<Tensor> out;
  ASSERT_TRUE((*program)->Run(env, {}, &out).ok());
  EXPECT_TRUE(TensorNear(out[0], {6}, {}));
  EXPECT_EQ(Program::CompileCount() - before, 3);  // Step, body, inner body.
  const Program* body = (*program)->sub_program(loop->op, "body");
  ASSERT_NE(body, nullptr);
  const Program* inner_body = body->sub_program(inner_op, "body");
  ASSERT_NE(inner_body, nullptr);
  EXPECT_EQ(body->runs(), 3u);
  EXPECT_EQ(inner_body->runs(), 6u);
}

TEST(LoopCompileTest, EachReplicaCompilesItsBodyOnce) {
  IPUConfig config;
  config.set_auto_select_ipus(2);
  auto system = IPUSystem::Create(config);
  ASSERT_TRUE(system.ok()) << system.status();
  Scope s = Scope::NewRootScope();
  auto loop = Repeat(
      s, 10,
      [&](const Scope& b, const std::vector<Output>& a) {
        return std::vector<Output>{ops::Add(b, a[0], ops::Const(b, 1.0f))};
      },
      {ops::Const(s, 0.0f)});
  ASSERT_TRUE(loop.ok()) << loop.status();
  IPUStrategy strategy(system->get());
  const int64_t before = Program::CompileCount();
  for (int run = 0; run < 2; ++run) {
    auto out = strategy.Run(*s.graph(), loop->outputs);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_TRUE(TensorNear((*out)[0], {10, 10}, {2}));  // Per replica.
  }
  // Two replicas (one Program each, as a Program runs on one thread), each
  // with its body; the second run uses the strategy's cached program.
  EXPECT_EQ(Program::CompileCount() - before, 2 * 2);
  auto dp = strategy.Compile(*s.graph(), loop->outputs, {});
  ASSERT_TRUE(dp.ok()) << dp.status();
  for (int r = 0; r < 2; ++r) {
    const Program* body = (*dp)->program(r).sub_program(loop->op, "body");
    ASSERT_NE(body, nullptr);
    EXPECT_EQ(body->runs(), 2u * 10u) << "replica " << r;
  }
}

// The body compiles with the enclosing program's fusion setting: unfused
// stays the reference inside loops too (float32 and float16 alike).
TEST(LoopCompileTest, BodiesFollowTheProgramsFusionSetting) {
  for (DType dtype : {DType::kFloat32, DType::kFloat16}) {
    Scope s = Scope::NewRootScope();
    Output w =
        ops::Cast(s, ops::Const<float>(s, {1, -2, 3, -4}, {2, 2}), dtype);
    Output bias = ops::Cast(s, ops::Const<float>(s, {0.5f, 0.5f}, {2}), dtype);
    auto loop =
        Repeat(s, 2,
               [&](const Scope& b, const std::vector<Output>& a) {
                 return std::vector<Output>{ops::Relu(
                     b, ops::BiasAdd(b, ops::MatMul(b, a[0], w), bias))};
               },
               {ops::Cast(s, ops::Const<float>(s, {1, 1}, {1, 2}), dtype)});
    ASSERT_TRUE(loop.ok()) << loop.status();
    std::vector<Tensor> results;
    for (bool fuse : {true, false}) {
      ProgramSpec spec;
      spec.fetches = {loop->outputs[0]};
      spec.fuse = fuse;
      auto program = Program::Compile(*s.graph(), spec);
      ASSERT_TRUE(program.ok()) << program.status();
      const Program* body = (*program)->sub_program(loop->op, "body");
      ASSERT_NE(body, nullptr);
      EXPECT_EQ(body->num_fused_away() > 0, fuse) << DTypeName(dtype);
      HostEnv host;
      RunEnv& env = host.env;
      std::vector<Tensor> out;
      ASSERT_TRUE((*program)->Run(env, {}, &out).ok());
      results.push_back(out[0]);
    }
    // By hand: [1, 1] W = [4, -6], + 0.5, relu -> [4.5, 0]; then
    // [4.5, 0] W = [4.5, -9], + 0.5, relu -> [5, 0] (exact in float16).
    EXPECT_TRUE(TensorNear(results[0], {5, 0}, {1, 2})) << DTypeName(dtype);
    EXPECT_TRUE(TensorNear(results[1], {5, 0}, {1, 2})) << DTypeName(dtype);
  }
}

// The memory plan counts what a loop's body needs while the loop runs.
constexpr int64_t kMiB = 1 << 20;

std::unique_ptr<IPUSystem> SystemWithBudget(int64_t bytes) {
  IPUConfig config;
  config.set_tiles_per_ipu(1);
  config.set_memory_per_tile(bytes);
  auto system = IPUSystem::Create(config);
  EXPECT_TRUE(system.ok()) << system.status();
  return std::move(system).value();
}

absl::StatusOr<std::unique_ptr<Program>> CompileFetching(const Scope& s,
                                                         Output fetch) {
  ProgramSpec spec;
  spec.fetches = {fetch};
  return Program::Compile(*s.graph(), spec);
}

// A variable read in a body runs for its users only: the read ops::Variable
// builds beside a variable (here an accumulator's, unused) would otherwise
// copy the variable every iteration and sit in the body's memory plan.
TEST(LoopCompileTest, UnusedVariableReadsDoNotRunInTheBody) {
  Scope s = Scope::NewRootScope();
  Node* unused_read = nullptr;
  Node* used_read = nullptr;
  auto loop = Repeat(
      s, 3,
      [&](const Scope& b, const std::vector<Output>& a) {
        ops::VariableHandle acc = ops::Variable(
            b.WithOpName("acc"), ops::Fill(b, {256, 1024}, 0.0));  // 1 MiB.
        ops::VariableHandle k =
            ops::Variable(b.WithOpName("k"), ops::Const(b, 2.0f));
        ops::AssignAdd(b, acc.handle, ops::Fill(b, {256, 1024}, 1.0));
        unused_read = acc.value.node;
        used_read = k.value.node;
        return std::vector<Output>{ops::Add(b, a[0], k.value)};
      },
      {ops::Const(s, 0.0f)});
  ASSERT_TRUE(loop.ok()) << loop.status();
  auto program = CompileFetching(s, loop->outputs[0]);
  ASSERT_TRUE(program.ok()) << program.status();
  const Program* body = (*program)->sub_program(loop->op, "body");
  ASSERT_NE(body, nullptr);
  const std::vector<std::string> names = body->NodeNamesInOrder();
  auto runs = [&](const Node* n) {
    return std::find(names.begin(), names.end(), n->name()) != names.end();
  };
  EXPECT_FALSE(runs(unused_read)) << unused_read->name();
  EXPECT_TRUE(runs(used_read)) << used_read->name();
  // The body's peak: the 1 MiB of ones AssignAdd reads, not a second MiB
  // for a copy of `acc`.
  EXPECT_LT((*program)->memory().loop_body_peak_bytes, 2 * kMiB);
  Session session(s.graph());
  ASSERT_TRUE(session.Initialize().ok());
  std::vector<Tensor> out;
  ASSERT_TRUE(session.Run({}, {loop->outputs[0]}, &out).ok());
  EXPECT_TRUE(TensorNear(out[0], {6}, {}));
}

// Each iteration sums a float32[256,1024] of ones: a 1 MiB body intermediate.
absl::StatusOr<Loop> SumOfOnesLoop(const Scope& s, int64_t n) {
  return Repeat(
      s, n,
      [&](const Scope& b, const std::vector<Output>& a) {
        Output ones = ops::Fill(b, {256, 1024}, 1.0);
        return std::vector<Output>{ops::Add(b, a[0], ops::ReduceSum(b, ones))};
      },
      {ops::Const(s, 0.0f)});
}

TEST(LoopMemoryTest, BodyIntermediatesCountAgainstTheBudget) {
  Scope s = Scope::NewRootScope();
  auto loop = SumOfOnesLoop(s, 2);
  ASSERT_TRUE(loop.ok()) << loop.status();
  // Outer program: the 4-byte Const is always-live; the loop's output is
  // fetched (not in the arena). Body: the 1 MiB `ones` and the 4-byte sum
  // (64 bytes aligned) are both live at ReduceSum; Add's result is fetched.
  const int64_t body_peak = kMiB + kTensorAlignment;
  auto program = CompileFetching(s, loop->outputs[0]);
  ASSERT_TRUE(program.ok()) << program.status();
  const MemoryPlan& m = (*program)->memory();
  EXPECT_EQ(m.always_live_bytes, 4);
  EXPECT_EQ(m.loop_body_peak_bytes, body_peak);
  EXPECT_EQ(m.peak_bytes, body_peak);
  EXPECT_EQ(m.largest_loop_body, "Repeat");

  const int64_t needed = 4 + body_peak;
  {
    auto system = SystemWithBudget(needed);
    IPUStrategy strategy(system.get());
    auto out = strategy.Run(*s.graph(), loop->outputs);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_TRUE(TensorNear((*out)[0], {2 * 256 * 1024}, {}));
  }
  auto system = SystemWithBudget(needed - 1);
  IPUStrategy strategy(system.get());
  absl::Status st = strategy.Run(*s.graph(), loop->outputs).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted) << st;
  EXPECT_NE(
      st.message().find("loop bodies:     1.00 MiB peak (largest: 'Repeat')"),
      std::string::npos)
      << st;
}

TEST(LoopMemoryTest, BodyPeakSitsOnTopOfWhatIsLiveAtTheLoop) {
  Scope s = Scope::NewRootScope();
  Output quarter = ops::Fill(s, {64, 1024}, 1.0);  // 256 KiB.
  auto loop = SumOfOnesLoop(s, 1);
  ASSERT_TRUE(loop.ok()) << loop.status();
  // `quarter` is consumed after the loop: live while the body runs.
  Output y = ops::Add(s, loop->outputs[0], ops::ReduceSum(s, quarter));
  auto program = CompileFetching(s, y);
  ASSERT_TRUE(program.ok()) << program.status();
  // Live at the loop: quarter [0, 256 KiB) and the loop's output (64 bytes
  // aligned) above it; the body's 1 MiB + 64 goes on top of both.
  EXPECT_EQ((*program)->memory().peak_bytes,
            256 * 1024 + kTensorAlignment + kMiB + kTensorAlignment);
}

TEST(LoopMemoryTest, NestedLoopBodiesRecurse) {
  Scope s = Scope::NewRootScope();
  auto loop =
      Repeat(s, 2,
             [&](const Scope& b, const std::vector<Output>& a) {
               auto inner = SumOfOnesLoop(b, 3);
               EXPECT_TRUE(inner.ok()) << inner.status();
               return std::vector<Output>{ops::Add(b, a[0], inner->outputs[0])};
             },
             {ops::Const(s, 0.0f)});
  ASSERT_TRUE(loop.ok()) << loop.status();
  auto program = CompileFetching(s, loop->outputs[0]);
  ASSERT_TRUE(program.ok()) << program.status();
  const MemoryPlan& m = (*program)->memory();
  // Outer body: the inner loop's output (64 bytes) is live while the inner
  // body's 1 MiB + 64 runs; its 4-byte Const is always-live there.
  EXPECT_EQ(m.peak_bytes, kTensorAlignment + kMiB + kTensorAlignment);
  EXPECT_EQ(m.always_live_bytes, 4 + 4);
  EXPECT_EQ(m.loop_body_always_live_bytes, 4);
  auto out = RunOne(s, {}, loop->outputs[0]);
  EXPECT_TRUE(TensorNear(out, {2 * 3 * 256 * 1024}, {}));
}

TEST(LoopMemoryTest, VariablesBuiltInABodyAreAlwaysLive) {
  Scope s = Scope::NewRootScope();
  auto loop = Repeat(s, 2,
                     [&](const Scope& b, const std::vector<Output>& a) {
                       ops::VariableHandle slot = ops::Variable(
                           b.WithOpName("slot"), ops::Fill(b, {256, 256}, 1.0));
                       return std::vector<Output>{
                           ops::Add(b, a[0], ops::ReduceSum(b, slot.value))};
                     },
                     {ops::Const(s, 0.0f)});
  ASSERT_TRUE(loop.ok()) << loop.status();
  auto program = CompileFetching(s, loop->outputs[0]);
  ASSERT_TRUE(program.ok()) << program.status();
  const MemoryPlan& m = (*program)->memory();
  EXPECT_EQ(m.variable_bytes, 256 * 256 * 4);
  EXPECT_EQ(m.loop_body_always_live_bytes, 256 * 256 * 4);
  ASSERT_EQ(m.variables.size(), 1u);
  EXPECT_EQ(m.variables[0].first->name(), "Repeat_body/slot");
}

}  // namespace
}  // namespace ipuflow::loops
