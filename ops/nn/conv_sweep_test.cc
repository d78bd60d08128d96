// Every convolution kernel path against a direct float64 reference (issue
// 30): Conv2D and its two backprops through the ops, which choose oneDNN,
// conv_small.h's direct kernels, the im2col GEMMs, the sparse gradients or
// float16 partials by shape and data (onednn_conv_choice.h); oneDNN's three
// primitives called directly on every shape; and GroupedConv2D's (groups,
// dilation). Strides, filter sizes, channel counts 1-17, odd and even sizes
// and both paddings, a subset chosen so the sweep runs in seconds in opt.
// It must stay clean under valgrind and ASan: oneDNN's 1x1 stride-2 filter
// gradient with fewer than 8 input channels wrote past its scratchpad
// (ops/onednn/onednn_conv.cc, IsStridedPointwise).
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/gradients.h"
#include "core/half.h"
#include "core/testing/op_test.h"
#include "core/thread_pool.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/nn/conv2d.h"
#include "ops/nn/conv2d_backprop.h"
#include "ops/nn/grouped_conv_2d.h"
#include "ops/onednn/onednn_conv.h"

namespace ipuflow::ops {
namespace {

using ::ipuflow::testing::RandomTensor;
using ::ipuflow::testing::RunGraph;
using ::ipuflow::testing::TensorNear;

// TensorFlow's SAME / VALID geometry with a dilated window, as oneDNN's
// ConvDims.
onednn::ConvDims Geometry(int64_t n, int64_t h, int64_t w, int64_t c,
                          int64_t oc, int64_t kh, int64_t kw, int64_t sh,
                          int64_t sw, bool same, int64_t groups = 1,
                          int64_t dh = 1, int64_t dw = 1) {
  onednn::ConvDims d{n, h, w, c, oc, kh, kw, sh, sw};
  d.groups = groups;
  d.dil_h = dh;
  d.dil_w = dw;
  const int64_t eh = (kh - 1) * dh + 1, ew = (kw - 1) * dw + 1;
  d.oh = same ? (h + sh - 1) / sh : (h - eh) / sh + 1;
  d.ow = same ? (w + sw - 1) / sw : (w - ew) / sw + 1;
  d.pad_top = same ? std::max<int64_t>((d.oh - 1) * sh + eh - h, 0) / 2 : 0;
  d.pad_left = same ? std::max<int64_t>((d.ow - 1) * sw + ew - w, 0) / 2 : 0;
  return d;
}

std::string Name(const onednn::ConvDims& d) {
  return absl::StrCat("x [", d.n, ",", d.h, ",", d.w, ",", d.c, "] filter [",
                      d.kh, ",", d.kw, ",", d.c / d.groups, ",", d.oc,
                      "] strides [", d.sh, ",", d.sw, "] dilations [", d.dil_h,
                      ",", d.dil_w, "] groups ", d.groups, " pads [", d.pad_top,
                      ",", d.pad_left, "]");
}

// y, dx and dw by direct loops in float64.
struct SweepReference {
  Tensor y, dx, dw;
};
SweepReference Naive(const onednn::ConvDims& d, const Tensor& x,
                     const Tensor& w, const Tensor& dy) {
  const int64_t cg = d.c / d.groups, ocg = d.oc / d.groups;
  std::vector<double> y(dy.NumElements()), dx(x.NumElements()),
      dw(w.NumElements());
  const float* px = x.data<float>();
  const float* pw = w.data<float>();
  const float* pd = dy.data<float>();
  for (int64_t b = 0; b < d.n; ++b)
    for (int64_t i = 0; i < d.oh; ++i)
      for (int64_t j = 0; j < d.ow; ++j)
        for (int64_t u = 0; u < d.kh; ++u)
          for (int64_t v = 0; v < d.kw; ++v) {
            const int64_t ih = i * d.sh - d.pad_top + u * d.dil_h;
            const int64_t iw = j * d.sw - d.pad_left + v * d.dil_w;
            if (ih < 0 || ih >= d.h || iw < 0 || iw >= d.w) continue;
            for (int64_t o = 0; o < d.oc; ++o)
              for (int64_t q = 0; q < cg; ++q) {
                const int64_t xi =
                    ((b * d.h + ih) * d.w + iw) * d.c + (o / ocg) * cg + q;
                const int64_t yi = ((b * d.oh + i) * d.ow + j) * d.oc + o;
                const int64_t wi = ((u * d.kw + v) * cg + q) * d.oc + o;
                y[yi] += double{px[xi]} * pw[wi];
                dx[xi] += double{pd[yi]} * pw[wi];
                dw[wi] += double{px[xi]} * pd[yi];
              }
          }
  auto tensor = [](const std::vector<double>& v, const TensorShape& shape) {
    Tensor t(DType::kFloat32, shape);
    std::copy(v.begin(), v.end(), t.data<float>());
    return t;
  };
  return {tensor(y, dy.shape()), tensor(dx, x.shape()), tensor(dw, w.shape())};
}

// float32 sums of up to `terms` products of values in [-1, 1].
double Tolerance(const onednn::ConvDims& d) {
  const int64_t terms = std::max(
      {d.kh * d.kw * d.c / d.groups, d.n * d.oh * d.ow, d.kh * d.kw * d.oc});
  return 4e-6 * terms;
}

// dy with about 85% zeros: the sparse gradient kernels' input
// (conv_sparse_grad.h takes dy at most 30% nonzero).
Tensor Sparse(const Tensor& dy) {
  Tensor t = dy.Copy();
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.NumElements(); ++i) {
    if ((i * 7919) % 100 >= 15) p[i] = 0;
  }
  return t;
}

double MaxAbs(const Tensor& t) {
  double m = 0;
  for (int64_t i = 0; i < t.NumElements(); ++i)
    m = std::max(m, double{std::fabs(t.data<float>()[i])});
  return m;
}

// oneDNN's three primitives directly, on a pool of the caller and one
// worker (batches of 2 and 3 split over both).
void CheckOnednn(const onednn::ConvDims& d, const Tensor& x, const Tensor& w,
                 const Tensor& dy, const SweepReference& ref, double tol) {
  ThreadPool pool("conv-sweep", 1);
  Tensor y(DType::kFloat32, ref.y.shape()), dx(DType::kFloat32, x.shape()),
      dw(DType::kFloat32, w.shape());
  ASSERT_TRUE(onednn::ConvForward(pool, x.data<float>(), w.data<float>(),
                                  y.data<float>(), d)
                  .ok());
  ASSERT_TRUE(onednn::ConvBackwardData(pool, dy.data<float>(), w.data<float>(),
                                       dx.data<float>(), d)
                  .ok());
  ASSERT_TRUE(onednn::ConvBackwardWeights(pool, x.data<float>(),
                                          dy.data<float>(), dw.data<float>(), d)
                  .ok());
  EXPECT_TRUE(TensorNear(y, ref.y, tol)) << "oneDNN forward";
  EXPECT_TRUE(TensorNear(dx, ref.dx, tol)) << "oneDNN backward data";
  EXPECT_TRUE(TensorNear(dw, ref.dw, tol)) << "oneDNN backward weights";
}

// Conv2D and its backprops through the ops, with float and half partials,
// dense and sparse dy: every path onednn_conv_choice.h may choose.
void CheckOps(const onednn::ConvDims& d, bool same, const Tensor& x,
              const Tensor& w, const Tensor& dy, const SweepReference& ref,
              double tol) {
  const Tensor dys = Sparse(dy);
  const SweepReference sparse_ref = Naive(d, x, w, dys);
  Scope s = Scope::NewRootScope();
  const std::vector<int64_t> strides = {d.sh, d.sw};
  const std::string padding = same ? "SAME" : "VALID";
  Output xo = Const(s, x), wo = Const(s, w), dyo = Const(s, dy),
         dyso = Const(s, dys);
  std::vector<Output> fetches;
  for (const char* partials : {"float", "half"}) {
    const ConvOptions o{"NHWC", partials};
    fetches.push_back(Conv2D(s, xo, wo, strides, padding, o));
    for (Output g : {dyo, dyso}) {
      fetches.push_back(Conv2DBackpropInput(s, xo, wo, g, strides, padding, o));
      fetches.push_back(
          Conv2DBackpropFilter(s, xo, wo, g, strides, padding, o));
    }
  }
  absl::StatusOr<std::vector<Tensor>> got = RunGraph(s, {}, fetches);
  ASSERT_TRUE(got.ok()) << got.status();
  const Tensor* want[] = {&ref.y, &ref.dx, &ref.dw, &sparse_ref.dx,
                          &sparse_ref.dw};
  const char* what[] = {"Conv2D", "input gradient", "filter gradient",
                        "input gradient (sparse dy)",
                        "filter gradient (sparse dy)"};
  for (int i = 0; i < 10; ++i) {
    const bool half = i >= 5;
    const Tensor& e = *want[i % 5];
    // float16 partials round the running sum every 16 products.
    const double t = half ? 2e-2 * std::max(1.0, MaxAbs(e)) : tol;
    EXPECT_TRUE(TensorNear((*got)[i], e, t))
        << what[i % 5] << (half ? ", half partials" : "");
  }
}

TEST(ConvSweepTest, EveryPathMatchesTheReference) {
  const int64_t channels[] = {1, 2, 3, 4, 5, 7, 8, 9, 12, 16, 17};
  const int64_t out_channels[] = {1, 3, 8, 10, 16, 17, 20};
  const int64_t sizes[][2] = {{8, 8}, {7, 7}, {6, 9}};
  const int64_t strides[][2] = {{1, 1}, {2, 2}, {3, 2}};
  int cases = 0;
  for (int64_t k : {1, 2, 3, 5}) {
    for (const auto& st : strides) {
      for (const auto& hw : sizes) {
        for (bool same : {false, true}) {
          for (int pick = 0; pick < 2; ++pick, ++cases) {
            const int64_t c = channels[(cases * 5 + pick) % 11];
            const int64_t oc = out_channels[(cases * 3 + pick) % 7];
            const onednn::ConvDims d = Geometry(1 + cases % 3, hw[0], hw[1], c,
                                                oc, k, k, st[0], st[1], same);
            SCOPED_TRACE(Name(d));
            const Tensor x = RandomTensor({d.n, d.h, d.w, c}, -1, 1, cases);
            const Tensor w = RandomTensor({k, k, c, oc}, -1, 1, cases + 1);
            const Tensor dy =
                RandomTensor({d.n, d.oh, d.ow, oc}, -1, 1, cases + 2);
            const SweepReference ref = Naive(d, x, w, dy);
            CheckOnednn(d, x, w, dy, ref, Tolerance(d));
            CheckOps(d, same, x, w, dy, ref, Tolerance(d));
          }
        }
      }
    }
  }
}

// Issue 30's case: [1, 8, 8, 3] by a 1x1 filter to 10 channels at stride
// 2, VALID; then a stride-1 case in the same process (the heap corruption
// aborted there).
TEST(ConvSweepTest, PointwiseStride2FilterGradientWithFewChannels) {
  for (int64_t c = 1; c <= 17; ++c) {
    for (int64_t stride : {2, 1}) {
      const onednn::ConvDims d =
          Geometry(1, 8, 8, c, 10, 1, 1, stride, stride, false);
      SCOPED_TRACE(Name(d));
      const Tensor x = RandomTensor({1, 8, 8, c}, -1, 1, 11);
      const Tensor w = RandomTensor({1, 1, c, 10}, -1, 1, 12);
      const Tensor dy = RandomTensor({1, d.oh, d.ow, 10}, -1, 1, 13);
      const SweepReference ref = Naive(d, x, w, dy);
      CheckOnednn(d, x, w, dy, ref, Tolerance(d));
      CheckOps(d, false, x, w, dy, ref, Tolerance(d));
    }
  }
}

// GroupedConv2D's three passes (oneDNN's grouped, depthwise and dilated
// kernels): through the op and its gradient, and directly.
TEST(ConvSweepTest, GroupedAndDilated) {
  int cases = 0;
  for (int64_t groups : {1, 2, 4}) {
    for (int64_t k : {1, 2, 3}) {
      for (const auto& dil : {std::vector<int64_t>{1, 1}, {2, 2}, {2, 3}}) {
        for (int64_t stride : {1, 2}) {
          for (bool same : {false, true}) {
            ++cases;
            const int64_t c = groups * (1 + cases % 3);
            const int64_t oc = groups * (1 + cases % 4);
            const int64_t h = 7 + cases % 2;
            const onednn::ConvDims d =
                Geometry(1 + cases % 2, h, h + 1, c, oc, k, k, stride, stride,
                         same, groups, dil[0], dil[1]);
            if (d.oh <= 0 || d.ow <= 0) continue;
            SCOPED_TRACE(Name(d));
            const Tensor x = RandomTensor({d.n, d.h, d.w, c}, -1, 1, cases);
            const Tensor w =
                RandomTensor({k, k, c / groups, oc}, -1, 1, cases + 1);
            const Tensor dy =
                RandomTensor({d.n, d.oh, d.ow, oc}, -1, 1, cases + 2);
            const SweepReference ref = Naive(d, x, w, dy);
            const double tol = Tolerance(d);
            CheckOnednn(d, x, w, dy, ref, tol);
            Scope s = Scope::NewRootScope();
            Output xo = Const(s, x), wo = Const(s, w);
            Output y = GroupedConv2D(s, xo, wo,
                                     {.strides = {stride, stride},
                                      .dilations = dil,
                                      .padding = same ? "SAME" : "VALID",
                                      .groups = groups});
            std::vector<Output> grads;
            ASSERT_TRUE(
                AddGradients(s, {y}, {xo, wo}, {Const(s, dy)}, &grads).ok());
            absl::StatusOr<std::vector<Tensor>> got =
                RunGraph(s, {}, {y, grads[0], grads[1]});
            ASSERT_TRUE(got.ok()) << got.status();
            EXPECT_TRUE(TensorNear((*got)[0], ref.y, tol));
            EXPECT_TRUE(TensorNear((*got)[1], ref.dx, tol));
            EXPECT_TRUE(TensorNear((*got)[2], ref.dw, tol));
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace ipuflow::ops
