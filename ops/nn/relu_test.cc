#include "ops/nn/relu.h"

#include <cmath>
#include <vector>

#include "core/half.h"
#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/testing/half_check.h"

namespace ipuflow::ops {
namespace {

using ::ipuflow::testing::CompareHalfToFloat;
using ::ipuflow::testing::HalfCheck;

using ::ipuflow::testing::MaxGradientError;
using ::ipuflow::testing::RandomTensor;
using ::ipuflow::testing::RunOne;
using ::ipuflow::testing::TensorNear;

TEST(ReluTest, Forward) {
  Scope s = Scope::NewRootScope();
  Output y = Relu(s, Const<float>(s, {-2, -0.5, 0, 0.5, 3}, {5}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, y), {0, 0, 0, 0.5, 3}, {5}));
}

TEST(ReluTest, Float16) {
  Scope s = Scope::NewRootScope();
  Output x = Const(
      s, Tensor::FromVector<half>(
             {half(-1.5f), half(2.5f), half(0.0f), half(-0.25f)}, {2, 2}));
  Output y = Relu(s, x);
  EXPECT_EQ(y.dtype(), DType::kFloat16);
  EXPECT_TRUE(TensorNear(RunOne(s, {}, y), {0, 2.5, 0, 0}, {2, 2}));
}

TEST(ReluTest, RejectsIntegers) {
  Scope s = Scope::NewRootScope();
  Relu(s.WithOpName("act"), Const<int32_t>(s, {1, -1}, {2}));
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find(
                "Relu 'act': input 'x' must be float32 or float16, got int32"),
            std::string::npos)
      << s.status();
}

TEST(ReluTest, Gradient) {
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, {2, 3});
  // Away from the kink at 0.
  Tensor xv = Tensor::FromVector<float>({-0.9f, 0.4f, -0.2f, 0.7f, 1.3f, -1.1f},
                                        {2, 3});
  auto err = MaxGradientError(s, {x}, {xv}, Relu(s, x));
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LT(*err, 1e-3);
}

TEST(ReluGradTest, ForwardAndShapeError) {
  Scope s = Scope::NewRootScope();
  Output dx = ReluGrad(s, Const<float>(s, {1, 2, 3}, {3}),
                       Const<float>(s, {0.5, 0, 2}, {3}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, dx), {1, 0, 3}, {3}));
  ReluGrad(s.WithOpName("g"), Const<float>(s, {1, 2, 3}, {3}),
           Const<float>(s, {1, 2}, {2}));
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find(
                "ReluGrad 'g': input 'dy' has shape [3] but input 'y' has "
                "shape [2]"),
            std::string::npos)
      << s.status();
}

// The vectorised path (whole packets) and the scalar tail agree with the
// definition: dy where y > 0; 0 for y <= 0, -0 and NaN.
TEST(ReluGradTest, PacketsAndTailMatchTheDefinition) {
  const int n = 37;  // Two 16-float packets and a tail of 5.
  std::vector<float> dy(n), y(n), want(n);
  for (int i = 0; i < n; ++i) {
    dy[i] = 1.5f + i;
    y[i] = (i % 4 == 0)   ? -1.0f
           : (i % 4 == 1) ? 0.0f
           : (i % 4 == 2) ? 2.0f
                          : 1e-30f;
    if (i == 9) y[i] = -0.0f;
    if (i == 13) y[i] = std::nanf("");
    want[i] = y[i] > 0 ? dy[i] : 0.0f;
  }
  Scope s = Scope::NewRootScope();
  Output dx = ReluGrad(s, Const<float>(s, dy, {n}), Const<float>(s, y, {n}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, dx), want, {n}, 0, 0));
}

TEST(ReluGradTest, SecondOrderGradient) {
  Scope s = Scope::NewRootScope();
  Output dy = Placeholder(s, DType::kFloat32, {4});
  Output dx = ReluGrad(s, dy, Const<float>(s, {1, -1, 2, -2}, {4}));
  auto err = MaxGradientError(s, {dy}, {RandomTensor({4}, -1, 1, 1)}, dx);
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LT(*err, 1e-3);
}

TEST(ReluTest, Float16KernelAndGradientMatchFloat32) {
  absl::StatusOr<HalfCheck> c = CompareHalfToFloat(
      [](const Scope& s, const std::vector<Output>& x) {
        return Relu(s, x[0]);
      },
      {RandomTensor({7, 33}, -1, 1, 1)});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->dtype, DType::kFloat16);
  EXPECT_LT(c->forward_error, 2e-3);
  EXPECT_LT(c->gradient_error, 2e-3);
}

}  // namespace
}  // namespace ipuflow::ops
