#include "ops/nn/softmax.h"

#include <cmath>

#include "core/half.h"
#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"

namespace ipuflow::ops {
namespace {

using ::ipuflow::testing::MaxGradientError;
using ::ipuflow::testing::RandomTensor;
using ::ipuflow::testing::RunOne;
using ::ipuflow::testing::TensorNear;

TEST(SoftmaxTest, RowsAndStability) {
  Scope s = Scope::NewRootScope();
  // Row 2 would overflow exp() without subtracting the max.
  Output y = Softmax(s, Const<float>(s, {1, 2, 3, 1000, 1000, 1000}, {2, 3}));
  EXPECT_TRUE(TensorNear(
      RunOne(s, {}, y),
      {0.09003057f, 0.24472847f, 0.66524096f, 1.f / 3, 1.f / 3, 1.f / 3},
      {2, 3}));
}

TEST(SoftmaxTest, LastAxisOfRank3AndFloat16) {
  const float ln3 = std::log(3.0f);
  Scope s = Scope::NewRootScope();
  Output y = Softmax(s, Const<float>(s, {0, ln3, 5, 5}, {2, 1, 2}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, y), {0.25, 0.75, 0.5, 0.5}, {2, 1, 2}));
  Output h = Softmax(
      s, Const(s, Tensor::FromVector<half>({half(0.f), half(ln3)}, {1, 2})));
  EXPECT_EQ(h.dtype(), DType::kFloat16);
  EXPECT_TRUE(TensorNear(RunOne(s, {}, h), {0.25, 0.75}, {1, 2}, 1e-3));
}

TEST(SoftmaxTest, Errors) {
  Scope s = Scope::NewRootScope();
  Softmax(s.WithOpName("sm"), Const(s, 1.0f));
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find(
                "Softmax 'sm': input 'logits' must have rank >= 1"),
            std::string::npos)
      << s.status();
  Scope s2 = Scope::NewRootScope();
  SoftmaxGrad(s2.WithOpName("g"), Const<float>(s2, {1, 2}, {1, 2}),
              Const<float>(s2, {1, 2, 3}, {1, 3}));
  EXPECT_NE(s2.status().message().find(
                "SoftmaxGrad 'g': input 'y' has shape [1,2] but input 'dy' has "
                "shape [1,3]"),
            std::string::npos)
      << s2.status();
}

TEST(SoftmaxTest, Gradient) {
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, {3, 4});
  auto err =
      MaxGradientError(s, {x}, {RandomTensor({3, 4}, -2, 2, 1)}, Softmax(s, x));
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LT(*err, 1e-3);
}

TEST(SoftmaxGradTest, ForwardAndSecondOrderGradient) {
  Scope s = Scope::NewRootScope();
  // (dy - sum(dy * y)) * y: sum = 0.5*2 + 0.5*4 = 3.
  Output g = SoftmaxGrad(s, Const<float>(s, {0.5, 0.5}, {1, 2}),
                         Const<float>(s, {2, 4}, {1, 2}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, g), {-0.5, 0.5}, {1, 2}));
  Output y = Placeholder(s, DType::kFloat32, {2, 3});
  Output dy = Placeholder(s, DType::kFloat32, {2, 3});
  auto err = MaxGradientError(
      s, {y, dy},
      {RandomTensor({2, 3}, 0, 1, 1), RandomTensor({2, 3}, -1, 1, 2)},
      SoftmaxGrad(s, y, dy));
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LT(*err, 1e-3);
}

}  // namespace
}  // namespace ipuflow::ops
