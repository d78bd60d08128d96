#include "ops/nn/sigmoid.h"

#include <cmath>

#include "core/half.h"
#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/testing/half_check.h"

namespace ipuflow::ops {
namespace {

using ::ipuflow::testing::MaxGradientError;
using ::ipuflow::testing::RandomTensor;
using ::ipuflow::testing::RunOne;
using ::ipuflow::testing::TensorNear;

TEST(SigmoidTest, Forward) {
  const float ln3 = std::log(3.0f);
  Scope s = Scope::NewRootScope();
  Output y = Sigmoid(s, Const<float>(s, {0, ln3, -ln3, 100, -100}, {5}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, y), {0.5, 0.75, 0.25, 1, 0}, {5}));
}

TEST(SigmoidTest, Float16) {
  Scope s = Scope::NewRootScope();
  Output y = Sigmoid(s, Const(s, Tensor::FromVector<half>({half(0.0f)})));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, y), {0.5}, {1}));
}

TEST(SigmoidTest, Gradient) {
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, {2, 3});
  auto err =
      MaxGradientError(s, {x}, {RandomTensor({2, 3}, -3, 3, 1)}, Sigmoid(s, x));
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LT(*err, 1e-3);
}

TEST(SigmoidGradTest, ForwardAndError) {
  Scope s = Scope::NewRootScope();
  // dy * y * (1 - y)
  Output dx = SigmoidGrad(s, Const<float>(s, {0.5, 0.25}, {2}),
                          Const<float>(s, {4, 2}, {2}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, dx), {1, 0.375}, {2}));
  SigmoidGrad(s.WithOpName("g"), Const<float>(s, {0.5}, {1}),
              Const<int32_t>(s, {1}, {1}));
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("SigmoidGrad 'g': input 'y' is float32 "
                                      "but input 'dy' is int32"),
            std::string::npos)
      << s.status();
}

TEST(SigmoidGradTest, SecondOrderGradient) {
  Scope s = Scope::NewRootScope();
  Output y = Placeholder(s, DType::kFloat32, {5});
  Output dy = Placeholder(s, DType::kFloat32, {5});
  auto err = MaxGradientError(
      s, {y, dy}, {RandomTensor({5}, 0, 1, 1), RandomTensor({5}, -1, 1, 2)},
      SigmoidGrad(s, y, dy));
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LT(*err, 1e-3);
}

// float16 in float32, one rounding per element (UnaryKernel and
// ElementwiseGradKernel's float16 paths), forward and gradient.
TEST(SigmoidTest, Float16KernelAndGradientMatchFloat32) {
  absl::StatusOr<::ipuflow::testing::HalfCheck> c =
      ::ipuflow::testing::CompareHalfToFloat(
          [](const Scope& s, const std::vector<Output>& x) {
            return Sigmoid(s, x[0]);
          },
          {RandomTensor({7, 33}, -3, 3, 1)});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->dtype, DType::kFloat16);
  EXPECT_LT(c->forward_error, 2e-3);
  EXPECT_LT(c->gradient_error, 2e-3);
}

}  // namespace
}  // namespace ipuflow::ops
