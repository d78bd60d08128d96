#include "ops/control/loops.h"

#include "core/ipu/ipu_strategy.h"
#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/math/add.h"
#include "ops/math/less.h"
#include "ops/math/mul.h"
#include "ops/state/assign.h"
#include "ops/state/variable.h"

namespace ipuflow::loops {
namespace {

using ::ipuflow::testing::RunOne;
using ::ipuflow::testing::TensorNear;

TEST(RepeatTest, CarriesValuesAndCapturesInvariants) {
  Scope s = Scope::NewRootScope();
  Output step = ops::Const(s, 2.0f);  // Captured from outside the body.
  auto loop = Repeat(s, 10, [&](const Scope& b, const std::vector<Output>& a) {
    return std::vector<Output>{ops::Add(b, a[0], step),
                               ops::Mul(b, a[1], ops::Const(b, 2.0f))};
  }, {ops::Const(s, 0.0f), ops::Const(s, 1.0f)});
  ASSERT_TRUE(loop.ok()) << loop.status();
  EXPECT_TRUE(TensorNear(RunOne(s, {}, loop->outputs[0]), {20}, {}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, loop->outputs[1]), {1024}, {}));
}

TEST(RepeatTest, VariableUpdatesPersistAcrossIterationsAndRuns) {
  Scope s = Scope::NewRootScope();
  ops::VariableHandle counter = ops::Variable(s.WithOpName("counter"),
                                              ops::Const(s, 0.0f));
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
  ops::VariableHandle counter = ops::Variable(s.WithOpName("counter"),
                                              ops::Const(s, 0.0f));
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

TEST(RepeatTest, RunsOnAnEmulatedIpu) {
  IPUConfig config;
  auto system = IPUSystem::Create(config);
  ASSERT_TRUE(system.ok());
  Scope s = Scope::NewRootScope();
  auto loop = Repeat(s, 1000, [&](const Scope& b, const std::vector<Output>& a) {
    return std::vector<Output>{ops::Add(b, a[0], ops::Const(b, 1.0f))};
  }, {ops::Const(s, 0.0f)});
  ASSERT_TRUE(loop.ok());
  IPUStrategy strategy(system->get());
  auto out = strategy.Run(*s.graph(), loop->outputs);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorNear((*out)[0], {1000}, {}));
}

TEST(RepeatTest, BodyOutputMismatchIsAnError) {
  Scope s = Scope::NewRootScope();
  auto wrong_count = Repeat(s, 2, [&](const Scope& b, const std::vector<Output>& a) {
    return std::vector<Output>{a[0], a[0]};
  }, {ops::Const(s, 0.0f)});
  EXPECT_EQ(wrong_count.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(wrong_count.status().message().find("returns 2 value(s) but the loop carries 1"),
            std::string::npos) << wrong_count.status();

  Scope s2 = Scope::NewRootScope();
  auto wrong_type = Repeat(s2, 2, [&](const Scope& b, const std::vector<Output>& a) {
    return std::vector<Output>{ops::Const<float>(b, {1, 2}, {2})};
  }, {ops::Const(s2, 0.0f)});
  EXPECT_NE(wrong_type.status().message().find(
                "mismatch between input types and output types for loop body: "
                "output 0 is float32[2] but input 0 is float32[]"),
            std::string::npos) << wrong_type.status();
}

TEST(WhileLoopTest, StopsWhenConditionFails) {
  Scope s = Scope::NewRootScope();
  auto loop = WhileLoop(
      s,
      [&](const Scope& c, const std::vector<Output>& a) {
        return ops::Less(c, a[0], ops::Const(c, 100.0f));
      },
      [&](const Scope& b, const std::vector<Output>& a) {
        return std::vector<Output>{ops::Mul(b, a[0], ops::Const(b, 3.0f))};
      },
      {ops::Const(s, 1.0f)});
  ASSERT_TRUE(loop.ok()) << loop.status();
  EXPECT_TRUE(TensorNear(RunOne(s, {}, loop->outputs[0]), {243}, {}));
}

TEST(WhileLoopTest, MaximumIterationsBoundsTheLoop) {
  Scope s = Scope::NewRootScope();
  auto loop = WhileLoop(
      s, [&](const Scope& c, const std::vector<Output>& a) {
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
            std::string::npos) << loop.status();
}

}  // namespace
}  // namespace ipuflow::loops
