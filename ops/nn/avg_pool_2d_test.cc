#include "ops/nn/avg_pool_2d.h"

#include <numeric>
#include <string>
#include <vector>

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

std::vector<float> Iota(int n) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), 1.0f);
  return v;
}

TEST(AvgPool2DTest, ValidAndSame) {
  Scope s = Scope::NewRootScope();
  Output x = Const<float>(s, Iota(16), {1, 4, 4, 1});
  Output valid = AvgPool2D(s, x, {2, 2}, {2, 2}, "VALID");
  EXPECT_TRUE(
      TensorNear(RunOne(s, {}, valid), {3.5, 5.5, 11.5, 13.5}, {1, 2, 2, 1}));
  // SAME: the windows at the edge average only their 6 or 4 valid pixels.
  Output same = AvgPool2D(s, x, {3, 3}, {2, 2}, "SAME");
  EXPECT_TRUE(
      TensorNear(RunOne(s, {}, same), {6, 7.5, 12, 13.5}, {1, 2, 2, 1}));
}

TEST(AvgPool2DTest, Nchw) {
  std::vector<float> v = Iota(16);
  for (float f : Iota(16)) v.push_back(10 * f);
  Scope s = Scope::NewRootScope();
  Output y = AvgPool2D(s, Const<float>(s, v, {1, 2, 4, 4}), {4, 4}, {1, 1},
                       "VALID", "NCHW");
  EXPECT_TRUE(TensorNear(RunOne(s, {}, y), {8.5, 85}, {1, 2, 1, 1}));
}

TEST(AvgPool2DTest, GradSpreadsOverValidPixels) {
  Scope s = Scope::NewRootScope();
  Output x = Const<float>(s, Iota(9), {1, 3, 3, 1});
  // 2x2 windows, stride 2, SAME on 3x3: windows of 4, 2, 2 and 1 pixels.
  Output dx = AvgPoolGrad(s, x, Const<float>(s, {4, 2, 2, 1}, {1, 2, 2, 1}),
                          {2, 2}, {2, 2}, "SAME");
  EXPECT_TRUE(
      TensorNear(RunOne(s, {}, dx), {1, 1, 1, 1, 1, 1, 1, 1, 1}, {1, 3, 3, 1}));
}

TEST(AvgPool2DTest, FiniteDifferenceGradients) {
  for (const std::string format : {"NHWC", "NCHW"}) {
    for (const std::string padding : {"SAME", "VALID"}) {
      Scope s = Scope::NewRootScope();
      const TensorShape shape = format == "NHWC" ? TensorShape({2, 5, 4, 2})
                                                 : TensorShape({2, 2, 5, 4});
      Output x = Placeholder(s, DType::kFloat32, shape);
      Output y = AvgPool2D(s, x, {3, 2}, {2, 1}, padding, format);
      auto err = MaxGradientError(s, {x}, {RandomTensor(shape, -1, 1, 1)}, y);
      ASSERT_TRUE(err.ok()) << err.status();
      EXPECT_LT(*err, 1e-3) << format << " " << padding;
    }
  }
}

TEST(AvgPool2DTest, SecondOrderGradient) {
  Scope s = Scope::NewRootScope();
  Output dy = Placeholder(s, DType::kFloat32, {1, 3, 2, 2});
  Output dx = AvgPoolGrad(s, Const(s, RandomTensor({1, 5, 4, 2}, 0, 1, 1)), dy,
                          {3, 3}, {2, 2}, "SAME");
  auto err =
      MaxGradientError(s, {dy}, {RandomTensor({1, 3, 2, 2}, -1, 1, 2)}, dx);
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LT(*err, 1e-3);
}

TEST(AvgPool2DTest, Errors) {
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, {1, 4, 4, 1});
  AvgPool2D(s.WithOpName("pool"), x, {2, 2}, {1, 1}, "REFLECT");
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find(
                "AvgPool2D 'pool': padding must be \"VALID\" or \"SAME\", got "
                "\"REFLECT\""),
            std::string::npos)
      << s.status();

  Scope s2 = Scope::NewRootScope();
  Output xi = Placeholder(s2, DType::kInt32, {1, 4, 4, 1});
  AvgPool2D(s2.WithOpName("pool"), xi, {2, 2}, {1, 1}, "VALID");
  EXPECT_NE(
      s2.status().message().find(
          "AvgPool2D 'pool': input 'x' must be float32 or float16, got int32"),
      std::string::npos)
      << s2.status();
}

TEST(AvgPool2DTest, RunTimeShapeError) {
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, {-1, -1, -1, 1});
  Output y = AvgPool2D(s.WithOpName("pool"), x, {3, 3}, {1, 1}, "VALID");
  auto out = ::ipuflow::testing::RunGraph(
      s, {{x, RandomTensor({1, 2, 5, 1}, 0, 1, 1)}}, {y});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find(
                "AvgPool2D 'pool': VALID padding: window height 3 is larger "
                "than the input height 2"),
            std::string::npos)
      << out.status();
}

TEST(AvgPool2DTest, Float16KernelAndGradientMatchFloat32) {
  absl::StatusOr<HalfCheck> c = CompareHalfToFloat(
      [](const Scope& s, const std::vector<Output>& x) {
        return AvgPool2D(s, x[0], {2, 2}, {2, 2}, "VALID");
      },
      {RandomTensor({2, 6, 6, 3}, -1, 1, 1)});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->dtype, DType::kFloat16);
  EXPECT_LT(c->forward_error, 2e-3);
  EXPECT_LT(c->gradient_error, 2e-3);
}

}  // namespace
}  // namespace ipuflow::ops
