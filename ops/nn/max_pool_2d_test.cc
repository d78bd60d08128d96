#include "ops/nn/max_pool_2d.h"

#include <algorithm>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"

namespace ipuflow::ops {
namespace {

using ::ipuflow::testing::MaxGradientError;
using ::ipuflow::testing::RunOne;
using ::ipuflow::testing::TensorNear;

// Distinct values 0.1 apart, shuffled: no window has a near-tie, so finite
// differences never move the argmax.
Tensor DistinctValues(const TensorShape& shape, uint32_t seed) {
  Tensor t(DType::kFloat32, shape);
  std::vector<float> v(t.NumElements());
  for (size_t i = 0; i < v.size(); ++i) v[i] = 0.1f * i - 1.0f;
  std::shuffle(v.begin(), v.end(), std::mt19937(seed));
  std::copy(v.begin(), v.end(), t.data<float>());
  return t;
}

std::vector<float> Iota(int n) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), 1.0f);
  return v;
}

TEST(MaxPool2DTest, ValidAndSame) {
  Scope s = Scope::NewRootScope();
  Output x = Const<float>(s, Iota(16), {1, 4, 4, 1});
  Output valid = MaxPool2D(s, x, {2, 2}, {2, 2}, "VALID");
  EXPECT_TRUE(TensorNear(RunOne(s, {}, valid), {6, 8, 14, 16}, {1, 2, 2, 1}));
  // 3x3 windows, stride 2, SAME: one row/column of padding after.
  Output same = MaxPool2D(s, x, {3, 3}, {2, 2}, "SAME");
  EXPECT_TRUE(TensorNear(RunOne(s, {}, same), {11, 12, 15, 16}, {1, 2, 2, 1}));
}

TEST(MaxPool2DTest, PerChannelAndNchw) {
  // Channel 1 is the negation of channel 0: its max is channel 0's min.
  std::vector<float> nhwc;
  for (float v : Iota(16)) {
    nhwc.push_back(v);
    nhwc.push_back(-v);
  }
  std::vector<float> nchw = Iota(16);
  for (float v : Iota(16)) nchw.push_back(-v);
  Scope s = Scope::NewRootScope();
  Output a = MaxPool2D(s, Const<float>(s, nhwc, {1, 4, 4, 2}), {1, 2, 2, 1},
                       {1, 2, 2, 1}, "VALID");
  EXPECT_TRUE(TensorNear(RunOne(s, {}, a), {6, -1, 8, -3, 14, -9, 16, -11},
                         {1, 2, 2, 2}));
  Output b = MaxPool2D(s, Const<float>(s, nchw, {1, 2, 4, 4}), {1, 1, 2, 2},
                       {1, 1, 2, 2}, "VALID", "NCHW");
  EXPECT_TRUE(TensorNear(RunOne(s, {}, b), {6, 8, 14, 16, -1, -3, -9, -11},
                         {1, 2, 2, 2}));
}

TEST(MaxPool2DTest, GradientGoesToFirstMaximum) {
  Scope s = Scope::NewRootScope();
  Output x = Const<float>(s, {1, 3, 3, 2}, {1, 2, 2, 1});
  Output y = MaxPool2D(s, x, {2, 2}, {1, 1}, "VALID");
  Output dx = MaxPoolGrad(s, x, y, Const<float>(s, {5}, {1, 1, 1, 1}), {2, 2},
                          {1, 1}, "VALID");
  EXPECT_TRUE(TensorNear(RunOne(s, {}, dx), {0, 5, 0, 0}, {1, 2, 2, 1}));
}

TEST(MaxPool2DTest, FiniteDifferenceGradients) {
  for (const std::string format : {"NHWC", "NCHW"}) {
    for (const std::string padding : {"SAME", "VALID"}) {
      Scope s = Scope::NewRootScope();
      const TensorShape shape = format == "NHWC" ? TensorShape({2, 5, 4, 2})
                                                 : TensorShape({2, 2, 5, 4});
      Output x = Placeholder(s, DType::kFloat32, shape);
      // Overlapping 3x3 windows with stride 2.
      Output y = MaxPool2D(s, x, {3, 3}, {2, 2}, padding, format);
      auto err = MaxGradientError(s, {x}, {DistinctValues(shape, 1)}, y);
      ASSERT_TRUE(err.ok()) << err.status();
      EXPECT_LT(*err, 1e-3) << format << " " << padding;
    }
  }
}

TEST(MaxPool2DTest, Errors) {
  auto expect_error = [](const TensorShape& shape,
                         const std::vector<int64_t>& ksize,
                         const std::string& padding,
                         const std::string& needle) {
    Scope s = Scope::NewRootScope();
    Output x = Placeholder(s, DType::kFloat32, shape);
    MaxPool2D(s.WithOpName("pool"), x, ksize, {1, 1}, padding);
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(s.status().message().find("MaxPool2D 'pool'"), std::string::npos);
    EXPECT_NE(s.status().message().find(needle), std::string::npos)
        << s.status();
  };
  expect_error({4, 4, 1}, {2, 2}, "VALID",
               "input 'x' must have rank 4, got shape [4,4,1]");
  expect_error({1, 4, 4, 1}, {2, 2, 2}, "VALID",
               "ksize [2,2,2] must have 2 entries");
  expect_error({1, 4, 4, 1}, {1, 2, 2, 2}, "VALID",
               "ksize [1,2,2,2] must be 1 in the batch and channel");
  expect_error({1, 4, 3, 1}, {2, 4}, "VALID",
               "window width 4 is larger than the input width 3");
}

TEST(MaxPool2DTest, GradRejectsWrongDy) {
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, {1, 4, 4, 1});
  Output y = MaxPool2D(s, x, {2, 2}, {2, 2}, "VALID");
  Output dy = Placeholder(s, DType::kFloat32, {1, 4, 4, 1});
  MaxPoolGrad(s.WithOpName("g"), x, y, dy, {2, 2}, {2, 2}, "VALID");
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find(
                "MaxPoolGrad 'g': input 'dy' has shape [1,4,4,1] but "
                "MaxPool2D's output has shape [1,2,2,1]"),
            std::string::npos)
      << s.status();
}

}  // namespace
}  // namespace ipuflow::ops
