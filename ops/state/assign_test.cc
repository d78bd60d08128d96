#include "ops/state/assign.h"

#include "core/session.h"
#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/state/variable.h"

namespace ipuflow::ops {
namespace {

using ::ipuflow::testing::TensorNear;

std::string Message(const absl::Status& s) { return std::string(s.message()); }

class AssignTest : public ::testing::Test {
 protected:
  // Runs `target` once and returns the variable's value afterwards.
  Tensor RunAndRead(Node* target) {
    EXPECT_TRUE(scope_.ok()) << scope_.status();
    if (session_ == nullptr) {
      session_ = std::make_unique<Session>(scope_.graph());
      EXPECT_TRUE(session_->Initialize().ok());
    }
    EXPECT_TRUE(session_->Run({}, {}, {target}, nullptr).ok());
    std::vector<Tensor> out;
    EXPECT_TRUE(session_->Run({}, {w_.value}, &out).ok());
    return out.empty() ? Tensor() : out[0];
  }

  Scope scope_ = Scope::NewRootScope();
  VariableHandle w_ =
      Variable(scope_.WithOpName("w"), Const<float>(scope_, {1, 2, 3}, {3}));
  std::unique_ptr<Session> session_;
};

TEST_F(AssignTest, AssignReplaces) {
  Node* a = Assign(scope_, w_.handle, Const<float>(scope_, {7, 8, 9}, {3}));
  EXPECT_TRUE(TensorNear(RunAndRead(a), {7, 8, 9}, {3}));
}

TEST_F(AssignTest, AssignAddAndSubAccumulate) {
  Node* add =
      AssignAdd(scope_, w_.handle, Const<float>(scope_, {1, 10, 100}, {3}));
  Node* sub =
      AssignSub(scope_, w_.handle, Const<float>(scope_, {0.5f, 1, 2}, {3}));
  EXPECT_TRUE(TensorNear(RunAndRead(add), {2, 12, 103}, {3}));
  EXPECT_TRUE(TensorNear(RunAndRead(add), {3, 22, 203}, {3}));
  EXPECT_TRUE(TensorNear(RunAndRead(sub), {2.5f, 21, 201}, {3}));
}

TEST_F(AssignTest, WrongShapeNamesVariableAndShapes) {
  AssignAdd(scope_.WithOpName("bad"), w_.handle,
            Const<float>(scope_, {1, 2}, {2}));
  EXPECT_EQ(scope_.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string m = Message(scope_.status());
  EXPECT_NE(m.find("AssignAdd 'bad'"), std::string::npos) << m;
  EXPECT_NE(m.find("variable 'w'"), std::string::npos) << m;
  EXPECT_NE(m.find("float32[2]"), std::string::npos) << m;
  EXPECT_NE(m.find("float32[3]"), std::string::npos) << m;
}

TEST_F(AssignTest, WrongDTypeNamesVariableAndDTypes) {
  Assign(scope_.WithOpName("bad"), w_.handle,
         Const<int32_t>(scope_, {1, 2, 3}, {3}));
  const std::string m = Message(scope_.status());
  EXPECT_NE(m.find("Assign 'bad'"), std::string::npos) << m;
  EXPECT_NE(m.find("int32[3] but variable 'w' is float32[3]"),
            std::string::npos)
      << m;
}

TEST(AssignAddTest, UninitialisedIsFailedPrecondition) {
  Scope s = Scope::NewRootScope();
  Output h = Variable(s.WithOpName("counter"), DType::kInt32, {});
  Node* inc =
      AssignAdd(s.WithOpName("inc"), h, Const(s, Tensor::Scalar<int32_t>(1)));
  Session session(s.graph());
  absl::Status st = session.Run({}, {}, {inc}, nullptr);
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(Message(st).find("AssignAdd 'inc'"), std::string::npos) << st;
  EXPECT_NE(Message(st).find("variable 'counter'"), std::string::npos) << st;
}

TEST(AssignAddTest, BoolVariablesCannotBeAddedTo) {
  Scope s = Scope::NewRootScope();
  VariableHandle f =
      Variable(s.WithOpName("flag"), Const(s, Tensor::Scalar<bool>(true)));
  Node* inc = AssignAdd(s.WithOpName("inc"), f.handle,
                        Const(s, Tensor::Scalar<bool>(true)));
  Session session(s.graph());
  ASSERT_TRUE(session.Initialize().ok());
  absl::Status st = session.Run({}, {}, {inc}, nullptr);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(Message(st).find("bool variable 'flag'"), std::string::npos) << st;
}

}  // namespace
}  // namespace ipuflow::ops
