#include "ops/array/reshape.h"

#include "core/gradients.h"
#include "core/half.h"
#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/array/identity.h"

namespace ipuflow::ops {
namespace {

using ::ipuflow::testing::MaxGradientError;
using ::ipuflow::testing::RandomTensor;
using ::ipuflow::testing::RunOne;
using ::ipuflow::testing::TensorNear;

TEST(ReshapeTest, InfersMinusOne) {
  Scope s = Scope::NewRootScope();
  Output y = Reshape(s, Const<float>(s, {1, 2, 3, 4, 5, 6}, {2, 3}), {-1, 2});
  EXPECT_EQ(y.shape(), TensorShape({3, 2}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, y), {1, 2, 3, 4, 5, 6}, {3, 2}));
}

TEST(ReshapeTest, UnknownBatchKeepsMinusOne) {
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, {-1, 28, 28});
  Output y = Reshape(s, x, {-1, 784});
  EXPECT_EQ(y.shape().DebugString(), "[?,784]");
  Tensor v = RandomTensor({2, 28, 28}, 0, 1, 3);
  Tensor out = RunOne(s, {{x, v}}, y);
  EXPECT_EQ(out.shape(), TensorShape({2, 784}));
}

TEST(ReshapeTest, ElementCountMismatchNamesShapes) {
  Scope s = Scope::NewRootScope();
  Reshape(s.WithOpName("r"), Const<float>(s, {1, 2, 3}, {3}), {2, 2});
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("Reshape 'r': cannot reshape [3]"),
            std::string::npos)
      << s.status();
}

TEST(ReshapeTest, Gradient) {
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, {2, 6});
  Output y = Reshape(s, x, {3, 2, 2});
  auto err = MaxGradientError(s, {x}, {RandomTensor({2, 6}, -1, 1, 1)}, y);
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LT(*err, 1e-3);
}

TEST(IdentityTest, ForwardsAndGradient) {
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, {3});
  Output y = Identity(s, x);
  Tensor v = Tensor::FromVector<float>({1, -2, 3});
  EXPECT_TRUE(TensorNear(RunOne(s, {{x, v}}, y), {1, -2, 3}, {3}));
  auto err = MaxGradientError(s, {x}, {v}, y);
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LT(*err, 1e-3);
}

TEST(ReshapeTest, Float16ValuesAndGradientKeepTheirDType) {
  Scope s = Scope::NewRootScope();
  Output x = Const(s, Tensor::Filled(DType::kFloat16, {2, 3, 4}, 0.1));
  Output y = Reshape(s, x, {-1, 12});
  ASSERT_EQ(y.dtype(), DType::kFloat16);
  Tensor v = RunOne(s, {}, y);
  ASSERT_EQ(v.dtype(), DType::kFloat16);
  EXPECT_EQ(v.shape(), TensorShape({2, 12}));
  EXPECT_EQ(v.data<half>()[11], half(0.1f));
  std::vector<Output> g;
  ASSERT_TRUE(AddGradients(s, {y}, {x}, {}, &g).ok());
  EXPECT_EQ(g[0].dtype(), DType::kFloat16);
}

}  // namespace
}  // namespace ipuflow::ops
