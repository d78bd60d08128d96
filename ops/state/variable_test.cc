#include "ops/state/variable.h"

#include "core/gradients.h"
#include "core/program.h"
#include "core/session.h"
#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/math/add.h"
#include "ops/state/assign.h"
#include "ops/state/initializers.h"
#include "ops/state/read_variable.h"

namespace ipuflow::ops {
namespace {

using ::ipuflow::testing::TensorNear;

std::string VariableMessage(const absl::Status& s) {
  return std::string(s.message());
}

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
  EXPECT_NE(VariableMessage(st).find("ReadVariable 'w/Read'"),
            std::string::npos)
      << st;
  EXPECT_NE(VariableMessage(st).find("variable 'w'"), std::string::npos) << st;
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
  EXPECT_NE(VariableMessage(s.status()).find("Variable 'w'"), std::string::npos)
      << s.status();
  EXPECT_NE(VariableMessage(s.status()).find("[?,3]"), std::string::npos)
      << s.status();
}

TEST(VariableTest, SharedNameWithAnotherShapeIsAnError) {
  Scope s = Scope::NewRootScope();
  Variable(s.WithOpName("a"), Const<float>(s, {1, 2}, {2}), {"shared"});
  Variable(s.WithOpName("b"), Const<float>(s, {1, 2, 3}, {3}), {"shared"});
  Session session(s.graph());
  absl::Status st = session.Initialize();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(VariableMessage(st).find("variable 'shared' already exists"),
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

TEST(VariableTest, Float16VariablesInitialiseReadAndUpdate) {
  Scope s = Scope::NewRootScope();
  VariableHandle w =
      Variable(s.WithOpName("w"), GlorotUniform(s, {4, 3}, 1, DType::kFloat16));
  VariableHandle b =
      Variable(s.WithOpName("b"), Zeros(s, {3}, DType::kFloat16));
  ASSERT_TRUE(s.ok()) << s.status();
  Output rb = ReadVariable(s, b.handle);
  EXPECT_EQ(ReadVariable(s, w.handle).dtype(), DType::kFloat16);
  EXPECT_EQ(rb.dtype(), DType::kFloat16);
  Node* inc = AssignAdd(s, b.handle,
                        Const(s, Tensor::Filled(DType::kFloat16, {3}, 0.5)));
  ASSERT_TRUE(s.ok()) << s.status();
  Session session(s.graph());
  ASSERT_TRUE(session.Initialize().ok());
  ASSERT_TRUE(session.Run({}, {}, {inc}, nullptr).ok());
  std::vector<Tensor> out;
  ASSERT_TRUE(session.Run({}, {rb, w.value}, &out).ok());
  ASSERT_EQ(out[0].dtype(), DType::kFloat16);
  EXPECT_TRUE(TensorNear(out[0], {0.5, 0.5, 0.5}, {3}));
  EXPECT_EQ(out[1].dtype(), DType::kFloat16);
}

// The memory plan of a graph in `dtype`: a [1000] variable and the sums of
// a [256, 64] feed.
MemoryPlan PlanOf(DType dtype) {
  Scope s = Scope::NewRootScope();
  VariableHandle v = Variable(s.WithOpName("v"), Zeros(s, {1000}, dtype));
  Output x = Placeholder(s, dtype, {256, 64});
  Output y = Add(s, Add(s, x, x), x);
  std::string signature;
  absl::StatusOr<ProgramSpec> spec = MakeProgramSpec(
      {{x, Tensor::Filled(dtype, {256, 64}, 1)}}, {y, v.value}, {}, &signature);
  EXPECT_TRUE(spec.ok()) << spec.status();
  absl::StatusOr<std::unique_ptr<Program>> p =
      Program::Compile(*s.graph(), *spec);
  EXPECT_TRUE(p.ok()) << p.status();
  return (*p)->memory();
}

TEST(VariableTest, MemoryPlanCountsFloat16AtTwoBytes) {
  const MemoryPlan f16 = PlanOf(DType::kFloat16);
  const MemoryPlan f32 = PlanOf(DType::kFloat32);
  EXPECT_EQ(f16.variable_bytes, 1000 * 2);
  EXPECT_EQ(f32.variable_bytes, 1000 * 4);
  // Intermediates [256, 64]: half the bytes.
  EXPECT_GT(f16.peak_bytes, 0);
  EXPECT_EQ(f16.peak_bytes * 2, f32.peak_bytes);
  EXPECT_EQ(f16.unplanned_bytes * 2, f32.unplanned_bytes);
}

}  // namespace
}  // namespace ipuflow::ops
