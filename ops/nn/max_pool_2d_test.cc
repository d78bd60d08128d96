#include "ops/nn/max_pool_2d.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/array/transpose.h"
#include "ops/testing/half_check.h"

namespace ipuflow::ops {
namespace {

using ::ipuflow::testing::CompareHalfToFloat;
using ::ipuflow::testing::HalfCheck;

using ::ipuflow::testing::MaxGradientError;
using ::ipuflow::testing::RandomTensor;
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

std::vector<float> PoolIota(int n) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), 1.0f);
  return v;
}

TEST(MaxPool2DTest, ValidAndSame) {
  Scope s = Scope::NewRootScope();
  Output x = Const<float>(s, PoolIota(16), {1, 4, 4, 1});
  Output valid = MaxPool2D(s, x, {2, 2}, {2, 2}, "VALID");
  EXPECT_TRUE(TensorNear(RunOne(s, {}, valid), {6, 8, 14, 16}, {1, 2, 2, 1}));
  // 3x3 windows, stride 2, SAME: one row/column of padding after.
  Output same = MaxPool2D(s, x, {3, 3}, {2, 2}, "SAME");
  EXPECT_TRUE(TensorNear(RunOne(s, {}, same), {11, 12, 15, 16}, {1, 2, 2, 1}));
}

TEST(MaxPool2DTest, PerChannelAndNchw) {
  // Channel 1 is the negation of channel 0: its max is channel 0's min.
  std::vector<float> nhwc;
  for (float v : PoolIota(16)) {
    nhwc.push_back(v);
    nhwc.push_back(-v);
  }
  std::vector<float> nchw = PoolIota(16);
  for (float v : PoolIota(16)) nchw.push_back(-v);
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

struct PoolCase {
  int64_t h, w, c, k, stride;
  bool same;
};

// y and dx (for `dy`) of a max pool by direct search, TF's padding rules,
// NHWC: the gradient goes to the first maximum in row-major window order.
void DirectPool(const PoolCase& p, const Tensor& x, const Tensor& dy, Tensor* y,
                Tensor* dx) {
  const int64_t n = x.dim(0), oh = dy.dim(1), ow = dy.dim(2);
  auto pad = [&](int64_t out, int64_t in) {
    return p.same ? std::max<int64_t>((out - 1) * p.stride + p.k - in, 0) / 2
                  : int64_t{0};
  };
  const int64_t pt = pad(oh, p.h), pl = pad(ow, p.w);
  *y = Tensor::Filled(DType::kFloat32, dy.shape(), 0);
  *dx = Tensor::Filled(DType::kFloat32, x.shape(), 0);
  const float* px = x.data<float>();
  for (int64_t b = 0; b < n; ++b)
    for (int64_t i = 0; i < oh; ++i)
      for (int64_t j = 0; j < ow; ++j)
        for (int64_t ch = 0; ch < p.c; ++ch) {
          int64_t best = -1;
          for (int64_t u = 0; u < p.k; ++u)
            for (int64_t v = 0; v < p.k; ++v) {
              const int64_t ih = i * p.stride - pt + u;
              const int64_t iw = j * p.stride - pl + v;
              if (ih < 0 || ih >= p.h || iw < 0 || iw >= p.w) continue;
              const int64_t at = ((b * p.h + ih) * p.w + iw) * p.c + ch;
              if (best < 0 || px[at] > px[best]) best = at;
            }
          const int64_t out = ((b * oh + i) * ow + j) * p.c + ch;
          if (best < 0) continue;
          y->data<float>()[out] = px[best];
          dx->data<float>()[best] += dy.data<float>()[out];
        }
}

// Wide channels (a SIMD packet or more) take a packet path, and so does the
// gradient when windows do not overlap; values are small integers so that
// windows hold ties.
TEST(MaxPool2DTest, WideChannelsMatchDirectSearch) {
  const PoolCase cases[] = {{8, 8, 10, 2, 2, false},  {7, 9, 8, 2, 2, true},
                            {9, 7, 20, 3, 3, true},   {7, 8, 10, 3, 3, true},
                            {8, 10, 12, 2, 3, false}, {10, 8, 9, 2, 3, true},
                            {7, 7, 10, 3, 2, true},   {6, 6, 3, 2, 2, false},
                            {5, 7, 17, 1, 2, true}};
  for (const PoolCase& p : cases) {
    for (const std::string format : {"NHWC", "NCHW"}) {
      SCOPED_TRACE(absl::StrCat(p.h, "x", p.w, "x", p.c, " k", p.k, " s",
                                p.stride, p.same ? " SAME " : " VALID ",
                                format));
      Tensor xv = RandomTensor({2, p.h, p.w, p.c}, 0, 4, 1);
      for (float& v : xv.span<float>()) v = std::floor(v);
      const int64_t oh =
          p.same ? (p.h + p.stride - 1) / p.stride : (p.h - p.k) / p.stride + 1;
      const int64_t ow =
          p.same ? (p.w + p.stride - 1) / p.stride : (p.w - p.k) / p.stride + 1;
      const Tensor dyv = RandomTensor({2, oh, ow, p.c}, -1, 1, 2);
      Tensor y, dx;
      DirectPool(p, xv, dyv, &y, &dx);

      Scope s = Scope::NewRootScope();
      const bool nchw = format == "NCHW";
      auto in = [&](const Tensor& t) {
        Output c = Const(s, t);
        return nchw ? Transpose(s, c, {0, 3, 1, 2}) : c;
      };
      auto out = [&](Output t) {
        return nchw ? Transpose(s, t, {0, 2, 3, 1}) : t;
      };
      const std::vector<int64_t> window =
          nchw ? std::vector<int64_t>{1, 1, p.k, p.k}
               : std::vector<int64_t>{p.k, p.k};
      const std::vector<int64_t> strides =
          nchw ? std::vector<int64_t>{1, 1, p.stride, p.stride}
               : std::vector<int64_t>{p.stride, p.stride};
      const std::string padding = p.same ? "SAME" : "VALID";
      Output x = in(xv);
      Output pooled = MaxPool2D(s, x, window, strides, padding, format);
      Output grad =
          MaxPoolGrad(s, x, pooled, in(dyv), window, strides, padding, format);
      EXPECT_TRUE(TensorNear(RunOne(s, {}, out(pooled)), y));
      EXPECT_TRUE(TensorNear(RunOne(s, {}, out(grad)), dx));
    }
  }
}

// The 2x2 stride-2 path (whole windows, no padding) against direct search:
// channels around the packet width (tails that overlap the packet before),
// odd heights and widths (a row and a column no window reads, whose
// gradient must be 0), SAME that pads (the general path) or not, and values
// in {0, 1} so most windows tie: the gradient must go to the first maximum
// in row-major window order, as before.
TEST(MaxPool2DTest, TwoByTwoStrideTwoMatchesDirectSearchWithTies) {
  for (int64_t c : {8, 9, 10, 15, 16, 17, 20, 24, 33}) {
    for (auto [h, w] : {std::pair<int64_t, int64_t>{8, 8}, {9, 7}, {5, 6}}) {
      for (bool same : {false, true}) {
        const PoolCase p{h, w, c, 2, 2, same};
        SCOPED_TRACE(
            absl::StrCat(h, "x", w, "x", c, same ? " SAME" : " VALID"));
        Tensor xv = RandomTensor({3, h, w, c}, 0, 2, 7);
        for (float& v : xv.span<float>()) v = std::floor(v);
        const int64_t oh = same ? (h + 1) / 2 : h / 2;
        const int64_t ow = same ? (w + 1) / 2 : w / 2;
        const Tensor dyv = RandomTensor({3, oh, ow, c}, -1, 1, 8);
        Tensor y, dx;
        DirectPool(p, xv, dyv, &y, &dx);
        Scope s = Scope::NewRootScope();
        Output x = Const(s, xv);
        const std::string padding = same ? "SAME" : "VALID";
        Output pooled = MaxPool2D(s, x, {2, 2}, {2, 2}, padding);
        Output grad =
            MaxPoolGrad(s, x, pooled, Const(s, dyv), {2, 2}, {2, 2}, padding);
        EXPECT_TRUE(TensorNear(RunOne(s, {}, pooled), y, 0));
        EXPECT_TRUE(TensorNear(RunOne(s, {}, grad), dx, 0));
      }
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

TEST(MaxPool2DTest, Float16KernelAndGradientMatchFloat32) {
  absl::StatusOr<HalfCheck> c = CompareHalfToFloat(
      [](const Scope& s, const std::vector<Output>& x) {
        return MaxPool2D(s, x[0], {2, 2}, {2, 2}, "VALID");
      },
      {RandomTensor({4, 8, 8, 10}, -1, 1, 1)});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->dtype, DType::kFloat16);
  EXPECT_LT(c->forward_error, 1e-6);
  EXPECT_LT(c->gradient_error, 1e-6);
}

// float16 in place on the 2x2 stride-2 path: odd sizes, a channel tail.
TEST(MaxPool2DTest, Float16TwoByTwoOddSizesMatchesFloat32) {
  absl::StatusOr<HalfCheck> c = CompareHalfToFloat(
      [](const Scope& s, const std::vector<Output>& x) {
        return MaxPool2D(s, x[0], {2, 2}, {2, 2}, "VALID");
      },
      {RandomTensor({3, 9, 7, 13}, -1, 1, 9)});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->dtype, DType::kFloat16);
  EXPECT_LT(c->forward_error, 1e-6);
  EXPECT_LT(c->gradient_error, 1e-6);
}

TEST(MaxPool2DTest, Float16NchwMatchesFloat32) {
  absl::StatusOr<HalfCheck> c = CompareHalfToFloat(
      [](const Scope& s, const std::vector<Output>& x) {
        return MaxPool2D(s, x[0], {1, 1, 3, 3}, {1, 1, 2, 2}, "SAME", "NCHW");
      },
      {RandomTensor({2, 3, 7, 7}, -1, 1, 2)});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->dtype, DType::kFloat16);
  EXPECT_LT(c->forward_error, 1e-6);
  // Overlapping windows add their gradients: one float16 rounding.
  EXPECT_LT(c->gradient_error, 2e-3);
}

TEST(MaxPool2DTest, Float16InPlaceWithPaddingMatchesFloat32) {
  // 16 channels (whole packets), SAME on 7x7: windows at the border cover
  // padding and the last input row belongs to a clipped window.
  absl::StatusOr<HalfCheck> c = CompareHalfToFloat(
      [](const Scope& s, const std::vector<Output>& x) {
        return MaxPool2D(s, x[0], {2, 2}, {2, 2}, "SAME");
      },
      {RandomTensor({2, 7, 7, 16}, -1, 1, 5)});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->dtype, DType::kFloat16);
  EXPECT_LT(c->forward_error, 1e-6);
  EXPECT_LT(c->gradient_error, 1e-6);
}

}  // namespace
}  // namespace ipuflow::ops
