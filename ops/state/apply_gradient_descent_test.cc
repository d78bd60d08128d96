#include "ops/state/apply_gradient_descent.h"

#include "core/session.h"
#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/state/variable.h"

namespace ipuflow::ops {
namespace {

using ::ipuflow::testing::TensorNear;

TEST(ApplyGradientDescentTest, TwoSteps) {
  // w = [1, 2], lr = 0.1, grad = [0.5, -1]:
  // step 1: w = [1 - 0.05, 2 + 0.1] = [0.95, 2.1]; step 2: [0.9, 2.2].
  Scope s = Scope::NewRootScope();
  VariableHandle w = Variable(s.WithOpName("w"), Const<float>(s, {1, 2}, {2}));
  Node* step = ApplyGradientDescent(s, w.handle, Const(s, 0.1f),
                                    Const<float>(s, {0.5f, -1}, {2}));
  ASSERT_TRUE(s.ok()) << s.status();
  Session session(s.graph());
  ASSERT_TRUE(session.Initialize().ok());
  std::vector<Tensor> out;
  ASSERT_TRUE(session.Run({}, {}, {step}, nullptr).ok());
  ASSERT_TRUE(session.Run({}, {w.value}, &out).ok());
  EXPECT_TRUE(TensorNear(out[0], {0.95f, 2.1f}, {2}));
  ASSERT_TRUE(session.Run({}, {}, {step}, nullptr).ok());
  ASSERT_TRUE(session.Run({}, {w.value}, &out).ok());
  EXPECT_TRUE(TensorNear(out[0], {0.9f, 2.2f}, {2}));
}

TEST(ApplyGradientDescentTest, Float16WithFedLearningRate) {
  Scope s = Scope::NewRootScope();
  VariableHandle w = Variable(
      s.WithOpName("w"), Const(s, Tensor::Filled(DType::kFloat16, {3}, 1.0)));
  Output lr = Placeholder(s, DType::kFloat32, {});
  Node* step = ApplyGradientDescent(
      s, w.handle, lr, Const(s, Tensor::Filled(DType::kFloat16, {3}, 2.0)));
  Session session(s.graph());
  ASSERT_TRUE(session.Initialize().ok());
  ASSERT_TRUE(
      session.Run({{lr, Tensor::Scalar<float>(0.25f)}}, {}, {step}, nullptr)
          .ok());
  std::vector<Tensor> out;
  ASSERT_TRUE(session.Run({}, {w.value}, &out).ok());
  EXPECT_TRUE(TensorNear(out[0], {0.5f, 0.5f, 0.5f}, {3}));
}

TEST(ApplyGradientDescentTest, GradShapeErrorNamesVariable) {
  Scope s = Scope::NewRootScope();
  VariableHandle w = Variable(s.WithOpName("w"), Const<float>(s, {1, 2}, {2}));
  ApplyGradientDescent(s.WithOpName("sgd"), w.handle, Const(s, 0.1f),
                       Const<float>(s, {1, 2, 3}, {3}));
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find(
                "ApplyGradientDescent 'sgd': input 'grad' is float32[3] but "
                "variable 'w' is float32[2]"),
            std::string::npos)
      << s.status();
}

TEST(ApplyGradientDescentTest, LearningRateMustBeAScalar) {
  Scope s = Scope::NewRootScope();
  VariableHandle w = Variable(s.WithOpName("w"), Const<float>(s, {1, 2}, {2}));
  ApplyGradientDescent(s.WithOpName("sgd"), w.handle,
                       Const<float>(s, {0.1f, 0.1f}, {2}),
                       Const<float>(s, {1, 2}, {2}));
  EXPECT_NE(
      s.status().message().find("ApplyGradientDescent 'sgd': input 'lr' "
                                "must be a float32 scalar, got shape [2]"),
      std::string::npos)
      << s.status();
}

TEST(ApplyGradientDescentTest, IntegerVariablesAreRejected) {
  Scope s = Scope::NewRootScope();
  VariableHandle w = Variable(s.WithOpName("w"), Const<int32_t>(s, {1}, {1}));
  ApplyGradientDescent(s.WithOpName("sgd"), w.handle, Const(s, 0.1f),
                       Const<int32_t>(s, {1}, {1}));
  EXPECT_NE(s.status().message().find("input 'grad' must be float32 or "
                                      "float16, got int32"),
            std::string::npos)
      << s.status();
}

}  // namespace
}  // namespace ipuflow::ops
