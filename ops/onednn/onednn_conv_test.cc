#include "ops/onednn/onednn_conv.h"

#include <algorithm>
#include <random>
#include <vector>

#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/nn/conv2d.h"
#include "ops/nn/conv2d_backprop.h"

namespace ipuflow::ops::onednn {
namespace {

using ::ipuflow::testing::RandomTensor;
using ::ipuflow::testing::RunOne;
using ::ipuflow::testing::TensorNear;

// TF's SAME / VALID geometry of [n, h, w, c] by [k, k, c, oc].
ConvDims Dims(int64_t n, int64_t h, int64_t w, int64_t c, int64_t oc,
              int64_t kh, int64_t kw, int64_t sh, int64_t sw, bool same) {
  ConvDims d{n, h, w, c, oc, kh, kw, sh, sw};
  d.oh = same ? (h + sh - 1) / sh : (h - kh) / sh + 1;
  d.ow = same ? (w + sw - 1) / sw : (w - kw) / sw + 1;
  d.pad_top = same ? std::max<int64_t>((d.oh - 1) * sh + kh - h, 0) / 2 : 0;
  d.pad_left = same ? std::max<int64_t>((d.ow - 1) * sw + kw - w, 0) / 2 : 0;
  return d;
}

// y, dx and dw by direct loops in double.
struct Reference {
  std::vector<float> y, dx, dw;
};
Reference Naive(const ConvDims& d, const float* x, const float* w,
                const float* dy) {
  std::vector<double> y(d.n * d.oh * d.ow * d.oc), dx(d.n * d.h * d.w * d.c),
      dw(d.kh * d.kw * d.c * d.oc);
  for (int64_t b = 0; b < d.n; ++b)
    for (int64_t i = 0; i < d.oh; ++i)
      for (int64_t j = 0; j < d.ow; ++j)
        for (int64_t u = 0; u < d.kh; ++u)
          for (int64_t v = 0; v < d.kw; ++v) {
            const int64_t ih = i * d.sh - d.pad_top + u;
            const int64_t iw = j * d.sw - d.pad_left + v;
            if (ih < 0 || ih >= d.h || iw < 0 || iw >= d.w) continue;
            for (int64_t q = 0; q < d.c; ++q)
              for (int64_t o = 0; o < d.oc; ++o) {
                const int64_t xi = ((b * d.h + ih) * d.w + iw) * d.c + q;
                const int64_t yi = ((b * d.oh + i) * d.ow + j) * d.oc + o;
                const int64_t wi = ((u * d.kw + v) * d.c + q) * d.oc + o;
                y[yi] += double(x[xi]) * w[wi];
                dx[xi] += double(dy[yi]) * w[wi];
                dw[wi] += double(x[xi]) * dy[yi];
              }
          }
  return {std::vector<float>(y.begin(), y.end()),
          std::vector<float>(dx.begin(), dx.end()),
          std::vector<float>(dw.begin(), dw.end())};
}

Tensor AsTensor(const std::vector<float>& v, const TensorShape& shape) {
  Tensor t(DType::kFloat32, shape);
  std::copy(v.begin(), v.end(), t.data<float>());
  return t;
}

struct Case {
  const char* name;
  ConvDims d;
  bool same;
};

class OnednnConvTest : public ::testing::TestWithParam<Case> {};

// oneDNN against direct loops and against ipuflow's ops (im2col + Eigen),
// on pools of 1, 2 and 4 threads (uneven batch shares included).
TEST_P(OnednnConvTest, MatchesReferenceAndOps) {
  const ConvDims& d = GetParam().d;
  const TensorShape xs{d.n, d.h, d.w, d.c}, ws{d.kh, d.kw, d.c, d.oc},
      ys{d.n, d.oh, d.ow, d.oc};
  const Tensor x = RandomTensor(xs, -1, 1, 1), w = RandomTensor(ws, -1, 1, 2),
               dy = RandomTensor(ys, -1, 1, 3);
  const Reference ref =
      Naive(d, x.data<float>(), w.data<float>(), dy.data<float>());
  const double tol = 2e-6 * d.kh * d.kw * d.c * std::max<int64_t>(d.n, d.oc);
  for (int workers : {0, 1, 3}) {
    SCOPED_TRACE(workers);
    ThreadPool pool("onednn-test", workers);
    Tensor y(DType::kFloat32, ys), dx(DType::kFloat32, xs),
        dw(DType::kFloat32, ws);
    ASSERT_TRUE(
        ConvForward(pool, x.data<float>(), w.data<float>(), y.data<float>(), d)
            .ok());
    ASSERT_TRUE(ConvBackwardData(pool, dy.data<float>(), w.data<float>(),
                                 dx.data<float>(), d)
                    .ok());
    ASSERT_TRUE(ConvBackwardWeights(pool, x.data<float>(), dy.data<float>(),
                                    dw.data<float>(), d)
                    .ok());
    EXPECT_TRUE(TensorNear(y, AsTensor(ref.y, ys), tol, 1e-5));
    EXPECT_TRUE(TensorNear(dx, AsTensor(ref.dx, xs), tol, 1e-5));
    EXPECT_TRUE(TensorNear(dw, AsTensor(ref.dw, ws), tol, 1e-5));
  }
  // ipuflow's ops (im2col + Eigen, or conv_small.h) on the same data.
  Scope s = Scope::NewRootScope();
  const std::vector<int64_t> strides = {d.sh, d.sw};
  const std::string padding = GetParam().same ? "SAME" : "VALID";
  Output xo = Const(s, x), wo = Const(s, w), dyo = Const(s, dy);
  EXPECT_TRUE(TensorNear(RunOne(s, {}, Conv2D(s, xo, wo, strides, padding)),
                         AsTensor(ref.y, ys), tol, 1e-5));
  EXPECT_TRUE(TensorNear(
      RunOne(s, {}, Conv2DBackpropInput(s, xo, wo, dyo, strides, padding)),
      AsTensor(ref.dx, xs), tol, 1e-5));
  EXPECT_TRUE(TensorNear(
      RunOne(s, {}, Conv2DBackpropFilter(s, xo, wo, dyo, strides, padding)),
      AsTensor(ref.dw, ws), tol, 1e-5));
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, OnednnConvTest,
    ::testing::Values(
        Case{"tiny_valid", Dims(2, 5, 4, 3, 2, 3, 2, 1, 1, false), false},
        Case{"same_stride2", Dims(3, 7, 6, 4, 5, 3, 3, 2, 2, true), true},
        Case{"valid_stride2_leftover", Dims(5, 8, 7, 2, 3, 3, 2, 2, 3, false),
             false},
        Case{"pointwise", Dims(4, 6, 6, 8, 16, 1, 1, 1, 1, false), false},
        Case{"same_5x5", Dims(2, 9, 9, 3, 7, 5, 5, 1, 1, true), true},
        Case{"tutorial_conv1", Dims(40, 28, 28, 1, 10, 5, 5, 1, 1, false),
             false},
        Case{"tutorial_conv2", Dims(40, 12, 12, 10, 20, 5, 5, 1, 1, false),
             false}),
    [](const ::testing::TestParamInfo<Case>& info) {
      return std::string(info.param.name);
    });

TEST(OnednnConvCacheTest, RepeatedShapesCreateNoPrimitives) {
  ThreadPool pool("onednn-test", 1);
  const ConvDims d = Dims(6, 10, 10, 3, 4, 3, 3, 1, 1, true);
  std::vector<float> x(6 * 10 * 10 * 3, 0.5f), w(3 * 3 * 3 * 4, 0.25f),
      y(6 * 10 * 10 * 4);
  ASSERT_TRUE(ConvForward(pool, x.data(), w.data(), y.data(), d).ok());
  const int64_t cached = CachedConvPrimitives();
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(ConvForward(pool, x.data(), w.data(), y.data(), d).ok());
  }
  EXPECT_EQ(CachedConvPrimitives(), cached);
}

TEST(OnednnConvCacheTest, EmptyBatchGivesZeros) {
  ThreadPool pool("onednn-test", 0);
  ConvDims d = Dims(0, 4, 4, 2, 3, 3, 3, 1, 1, false);
  std::vector<float> dw(3 * 3 * 2 * 3, 7.0f);
  ASSERT_TRUE(ConvBackwardWeights(pool, nullptr, nullptr, dw.data(), d).ok());
  EXPECT_EQ(*std::max_element(dw.begin(), dw.end()), 0.0f);
}

}  // namespace
}  // namespace ipuflow::ops::onednn
