#include "ops/state/no_op.h"

#include "core/session.h"
#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/state/assign.h"
#include "ops/state/variable.h"

namespace ipuflow::ops {
namespace {

using ::ipuflow::testing::TensorNear;

TEST(GroupTest, RunsEveryDependency) {
  Scope s = Scope::NewRootScope();
  VariableHandle a = Variable(s.WithOpName("a"), Const(s, 1.f));
  VariableHandle b = Variable(s.WithOpName("b"), Const(s, 2.f));
  Node* group = Group(s, {AssignAdd(s, a.handle, Const(s, 10.f)),
                          AssignAdd(s, b.handle, Const(s, 20.f))});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(group->op(), "NoOp");
  EXPECT_EQ(group->num_outputs(), 0);
  Session session(s.graph());
  ASSERT_TRUE(session.Initialize().ok());
  ASSERT_TRUE(session.Run({}, {}, {group}, nullptr).ok());
  std::vector<Tensor> out;
  ASSERT_TRUE(session.Run({}, {a.value, b.value}, &out).ok());
  EXPECT_TRUE(TensorNear(out[0], {11}, {}));
  EXPECT_TRUE(TensorNear(out[1], {22}, {}));
}

TEST(GroupTest, NoOpAloneRuns) {
  Scope s = Scope::NewRootScope();
  Node* n = NoOp(s);
  Session session(s.graph());
  EXPECT_TRUE(session.Run({}, {}, {n}, nullptr).ok());
}

TEST(GroupTest, NullDependencyIsAnError) {
  Scope s = Scope::NewRootScope();
  EXPECT_EQ(Group(s, {NoOp(s), nullptr}), nullptr);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("dependency 1 is null"),
            std::string::npos)
      << s.status();
}

TEST(GroupTest, NoOpTakesNoInputs) {
  Scope s = Scope::NewRootScope();
  s.WithOpName("bad").AddNode("NoOp", {Const(s, 1.f)});
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("NoOp 'bad'"), std::string::npos)
      << s.status();
}

}  // namespace
}  // namespace ipuflow::ops
