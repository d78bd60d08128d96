#include "ops/state/variable.h"

#include "core/gradients.h"
#include "core/session.h"
#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/math/add.h"
#include "ops/state/assign.h"
#include "ops/state/read_variable.h"

namespace ipuflow::ops {
namespace {

using ::ipuflow::testing::TensorNear;

std::string Message(const absl::Status& s) { return std::string(s.message()); }

TEST(VariableTest, InitialisesAndPersistsAcrossRuns) {
  Scope s = Scope::NewRootScope();
  VariableHandle w =
      Variable(s.WithOpName("w"), Const<float>(s, {1, 2, 3, 4}, {2, 2}));
  ASSERT_TRUE(s.ok()) << s.status();
  Node* inc = AssignAdd(s, w.handle, Const<float>(s, {1, 1, 1, 1}, {2, 2}));
  Session session(s.graph());
  ASSERT_TRUE(session.Initialize().ok());
  std::vector<Tensor> out;
  for (int run = 0; run < 3; ++run) {
    ASSERT_TRUE(session.Run({}, {}, {inc}, nullptr).ok());
  }
  ASSERT_TRUE(session.Run({}, {w.value}, &out).ok());
  EXPECT_TRUE(TensorNear(out[0], {4, 5, 6, 7}, {2, 2}));
  // Initialize() again resets the variable.
  ASSERT_TRUE(session.Initialize().ok());
  ASSERT_TRUE(session.Run({}, {w.value}, &out).ok());
  EXPECT_TRUE(TensorNear(out[0], {1, 2, 3, 4}, {2, 2}));
}

TEST(VariableTest, NamesCollectionsAndAttributes) {
  Scope s = Scope::NewRootScope().NewSubScope("dense");
  VariableHandle w = Variable(s.WithOpName("w"), Const<float>(s, {1, 2}, {2}));
  VariableHandle b = Variable(s.WithOpName("b"), Const<float>(s, {0}, {1}),
                              {/*shared_name=*/"", /*trainable=*/false});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(w.handle.node->name(), "dense/w");
  EXPECT_EQ(w.initializer->name(), "dense/w/Assign");
  EXPECT_EQ(w.value.node->name(), "dense/w/Read");
  EXPECT_EQ(w.handle.dtype(), DType::kResource);
  EXPECT_EQ(w.handle.shape(), TensorShape());
  EXPECT_EQ(w.value.shape(), TensorShape({2}));
  const Graph& g = *s.graph();
  EXPECT_EQ(g.collection("variables"),
            (std::vector<Node*>{w.handle.node, b.handle.node}));
  EXPECT_EQ(g.collection("trainable_variables"),
            (std::vector<Node*>{w.handle.node}));
  EXPECT_EQ(g.collection("initializers"),
            (std::vector<Node*>{w.initializer, b.initializer}));
  EXPECT_FALSE(b.handle.node->attr<bool>("trainable"));
}

TEST(VariableTest, ReadBeforeInitialiseIsFailedPrecondition) {
  Scope s = Scope::NewRootScope();
  VariableHandle w = Variable(s.WithOpName("w"), Const<float>(s, {1, 2}, {2}));
  Session session(s.graph());
  std::vector<Tensor> out;
  absl::Status st = session.Run({}, {w.value}, &out);
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(Message(st).find("ReadVariable 'w/Read'"), std::string::npos) << st;
  EXPECT_NE(Message(st).find("variable 'w'"), std::string::npos) << st;
}

TEST(VariableTest, SharedNameSharesTheValue) {
  Scope s = Scope::NewRootScope();
  Variable(s.WithOpName("a"), Const<float>(s, {1, 2}, {2}), {"shared"});
  Output b = Variable(s.WithOpName("b"), DType::kFloat32, {2}, {"shared"});
  Output read_b = ReadVariable(s, b);
  Session session(s.graph());
  ASSERT_TRUE(session.Initialize().ok());
  std::vector<Tensor> out;
  ASSERT_TRUE(session.Run({}, {read_b}, &out).ok());
  EXPECT_TRUE(TensorNear(out[0], {1, 2}, {2}));
  EXPECT_NE(session.resources()->FindVariable("shared"), nullptr);
}

TEST(VariableTest, UnknownShapeIsAnErrorNamingTheVariable) {
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, {-1, 3});
  VariableHandle v = Variable(s.WithOpName("w"), x);
  EXPECT_FALSE(v.handle.valid());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(Message(s.status()).find("Variable 'w'"), std::string::npos)
      << s.status();
  EXPECT_NE(Message(s.status()).find("[?,3]"), std::string::npos) << s.status();
}

TEST(VariableTest, SharedNameWithAnotherShapeIsAnError) {
  Scope s = Scope::NewRootScope();
  Variable(s.WithOpName("a"), Const<float>(s, {1, 2}, {2}), {"shared"});
  Variable(s.WithOpName("b"), Const<float>(s, {1, 2, 3}, {3}), {"shared"});
  Session session(s.graph());
  absl::Status st = session.Initialize();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(Message(st).find("variable 'shared' already exists"),
            std::string::npos)
      << st;
}

TEST(VariableTest, GradientsFlowToReadsNotHandles) {
  // loss = w + w (through the read): d loss / d read = 2.
  Scope s = Scope::NewRootScope();
  VariableHandle w = Variable(s.WithOpName("w"), Const<float>(s, {1, 2}, {2}));
  Output loss = Add(s, w.value, w.value);
  std::vector<Output> grads;
  ASSERT_TRUE(AddGradients(s, {loss}, {w.value}, {}, &grads).ok());
  EXPECT_TRUE(TensorNear(testing::RunOne(s, {}, grads[0]), {2, 2}, {2}));
  // The handle is not differentiable.
  EXPECT_EQ(AddGradients(s, {loss}, {w.handle}, {}, &grads).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ipuflow::ops
