#include "ops/nn/tanh.h"

#include <cmath>

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

TEST(TanhTest, Forward) {
  const float a = std::atanh(0.5f);
  Scope s = Scope::NewRootScope();
  Output y = Tanh(s, Const<float>(s, {0, a, -a, 50}, {2, 2}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, y), {0, 0.5, -0.5, 1}, {2, 2}));
}

TEST(TanhTest, RejectsBool) {
  Scope s = Scope::NewRootScope();
  Tanh(s.WithOpName("t"), Const(s, Tensor::FromVector<bool>({true})));
  EXPECT_NE(s.status().message().find(
                "Tanh 't': input 'x' must be float32 or float16, got bool"),
            std::string::npos)
      << s.status();
}

TEST(TanhTest, Gradient) {
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, {3, 2});
  auto err =
      MaxGradientError(s, {x}, {RandomTensor({3, 2}, -2, 2, 1)}, Tanh(s, x));
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LT(*err, 1e-3);
}

TEST(TanhGradTest, ForwardAndSecondOrderGradient) {
  Scope s = Scope::NewRootScope();
  // dy * (1 - y^2)
  Output g = TanhGrad(s, Const<float>(s, {0.5, -1}, {2}),
                      Const<float>(s, {4, 3}, {2}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, g), {3, 0}, {2}));
  Output y = Placeholder(s, DType::kFloat32, {4});
  Output dy = Placeholder(s, DType::kFloat32, {4});
  auto err = MaxGradientError(
      s, {y, dy}, {RandomTensor({4}, -1, 1, 1), RandomTensor({4}, -1, 1, 2)},
      TanhGrad(s, y, dy));
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LT(*err, 1e-3);
}

// float16 in float32, one rounding per element (UnaryKernel and
// ElementwiseGradKernel's float16 paths), forward and gradient.
TEST(TanhTest, Float16KernelAndGradientMatchFloat32) {
  absl::StatusOr<::ipuflow::testing::HalfCheck> c =
      ::ipuflow::testing::CompareHalfToFloat(
          [](const Scope& s, const std::vector<Output>& x) {
            return Tanh(s, x[0]);
          },
          {RandomTensor({7, 33}, -3, 3, 1)});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->dtype, DType::kFloat16);
  EXPECT_LT(c->forward_error, 2e-3);
  EXPECT_LT(c->gradient_error, 2e-3);
}

}  // namespace
}  // namespace ipuflow::ops
