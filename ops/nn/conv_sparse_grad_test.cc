#include "ops/nn/conv_sparse_grad.h"

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/nn/conv2d_backprop.h"

namespace ipuflow::ops {
namespace {

using ::ipuflow::testing::RandomTensor;
using ::ipuflow::testing::RunOne;
using ::ipuflow::testing::TensorNear;

struct Case {
  int64_t n, h, w, c, k, oc, stride;
};

int64_t Out(int64_t in, int64_t k, int64_t s) { return (in - k) / s + 1; }

Window2D WindowOf(const Case& p) {
  const int64_t oh = Out(p.h, p.k, p.stride), ow = Out(p.w, p.k, p.stride);
  return {p.n, p.h, p.w, p.c, p.k, p.k, p.stride, p.stride, oh, ow, 0, 0};
}

// dy as max pooling 2x2 and a ReLU pass it back to a convolution: one
// nonzero per window and channel, a third of those zeroed (about 17%).
Tensor PooledDy(const Case& p, uint32_t seed) {
  const int64_t oh = Out(p.h, p.k, p.stride), ow = Out(p.w, p.k, p.stride);
  Tensor t = RandomTensor(TensorShape({p.n, oh, ow, p.oc}), -1, 1, seed);
  std::mt19937 gen(seed);
  float* d = t.data<float>();
  for (int64_t b = 0; b < p.n; ++b)
    for (int64_t i = 0; i < oh; i += 2)
      for (int64_t j = 0; j < ow; j += 2)
        for (int64_t o = 0; o < p.oc; ++o) {
          const unsigned keep = gen() % 4, alive = gen() % 3 != 0;
          for (unsigned q = 0; q < 4; ++q) {
            const int64_t ii = i + q / 2, jj = j + q % 2;
            if (ii >= oh || jj >= ow) continue;
            if (q != keep || !alive) d[((b * oh + ii) * ow + jj) * p.oc + o] = 0;
          }
        }
  return t;
}

// The gradients by definition, in double: dx[x pixel] and dw[k, o] summed
// over every (output pixel, channel), zeros included.
void Reference(const Case& p, const Tensor& x, const Tensor& w,
               const Tensor& dy, Tensor* dx, Tensor* dw) {
  const Window2D g = WindowOf(p);
  std::vector<double> sx(x.NumElements()), sw(w.NumElements());
  const float *px = x.data<float>(), *pw = w.data<float>(),
              *pd = dy.data<float>();
  for (int64_t b = 0; b < g.n; ++b)
    for (int64_t i = 0; i < g.oh; ++i)
      for (int64_t j = 0; j < g.ow; ++j)
        for (int64_t o = 0; o < p.oc; ++o) {
          const double d = pd[((b * g.oh + i) * g.ow + j) * p.oc + o];
          for (int64_t u = 0; u < g.kh; ++u)
            for (int64_t v = 0; v < g.kw; ++v)
              for (int64_t q = 0; q < g.c; ++q) {
                const int64_t xi =
                    ((b * g.h + i * g.sh + u) * g.w + j * g.sw + v) * g.c + q;
                const int64_t wi = ((u * g.kw + v) * g.c + q) * p.oc + o;
                sx[xi] += d * pw[wi];
                sw[wi] += d * px[xi];
              }
        }
  *dx = Tensor(DType::kFloat32, x.shape());
  *dw = Tensor(DType::kFloat32, w.shape());
  for (size_t i = 0; i < sx.size(); ++i) dx->data<float>()[i] = sx[i];
  for (size_t i = 0; i < sw.size(); ++i) dw->data<float>()[i] = sw[i];
}

class SparseConvGradTest : public ::testing::TestWithParam<Case> {};

TEST_P(SparseConvGradTest, BothGradientsMatchTheDefinition) {
  const Case& p = GetParam();
  const Tensor xv = RandomTensor(TensorShape({p.n, p.h, p.w, p.c}), -1, 1, 1);
  const Tensor wv =
      RandomTensor(TensorShape({p.k, p.k, p.c, p.oc}), -1, 1, 2);
  const Tensor dyv = PooledDy(p, 3);
  // The ops take the sparse kernels on this dy.
  ASSERT_TRUE(UseSparseConvGrad(dyv.data<float>(), WindowOf(p), p.oc));
  Tensor want_dx, want_dw;
  Reference(p, xv, wv, dyv, &want_dx, &want_dw);

  Scope s = Scope::NewRootScope();
  Output x = Const(s, xv), w = Const(s, wv), dy = Const(s, dyv);
  const std::vector<int64_t> strides = {p.stride, p.stride};
  Output dx = Conv2DBackpropInput(s, x, w, dy, strides, "VALID");
  Output dw = Conv2DBackpropFilter(s, x, w, dy, strides, "VALID");
  EXPECT_TRUE(TensorNear(RunOne(s, {}, dx), want_dx, 1e-4, 1e-4));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, dw), want_dw, 1e-4, 1e-4));
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, SparseConvGradTest,
    ::testing::Values(
        // The tutorial ConvNet's second convolution (10 -> 20, k5), rows of
        // 50 floats (6 packets and a tail).
        Case{3, 12, 12, 10, 5, 20, 1},
        // Stride 2, a channel count that is not a multiple of 8, rows of
        // exactly two packets.
        Case{2, 11, 9, 8, 2, 13, 2},
        // Rows longer than 8 packets (two register tiles), one channel.
        Case{2, 7, 8, 24, 3, 1, 1},
        // More than 64 channels: the scalar scan.
        Case{1, 6, 6, 16, 3, 70, 1}));

TEST(SparseConvGradTest, ChoosesTheDenseKernelsWhereTheyWin) {
  const Case b2{2, 12, 12, 10, 5, 20, 1};
  const Tensor sparse = PooledDy(b2, 4);
  const Tensor dense = RandomTensor(sparse.shape(), 0.5, 1, 5);
  EXPECT_TRUE(UseSparseConvGrad(sparse.data<float>(), WindowOf(b2), b2.oc));
  EXPECT_FALSE(UseSparseConvGrad(dense.data<float>(), WindowOf(b2), b2.oc));
  // Rows of 5 floats (the ConvNet's first convolution, 1 -> 10).
  const Case b1{2, 28, 28, 1, 5, 10, 1};
  const Tensor b1_dy = PooledDy(b1, 6);
  EXPECT_FALSE(UseSparseConvGrad(b1_dy.data<float>(), WindowOf(b1), b1.oc));
  // Windows that reach into SAME padding.
  Window2D same = WindowOf(b2);
  same.pad_top = same.pad_left = 2;
  EXPECT_FALSE(UseSparseConvGrad(sparse.data<float>(), same, b2.oc));
}

TEST(SparseConvGradTest, NonzeroFractionCountsNaNs) {
  std::vector<float> v(19, 0.0f);
  v[0] = 1;
  v[9] = -2;
  v[18] = std::numeric_limits<float>::quiet_NaN();  // In the scalar tail.
  v[3] = std::numeric_limits<float>::quiet_NaN();   // In a packet.
  EXPECT_DOUBLE_EQ(NonzeroFraction(v.data(), 19), 4.0 / 19);
  EXPECT_DOUBLE_EQ(NonzeroFraction(v.data(), 0), 0.0);
}

TEST(SparseConvGradTest, NaNGradientsReachBothOutputs) {
  const Case p{1, 12, 12, 10, 5, 20, 1};
  Tensor dyv = PooledDy(p, 7);
  dyv.data<float>()[0] = std::numeric_limits<float>::quiet_NaN();
  ASSERT_TRUE(UseSparseConvGrad(dyv.data<float>(), WindowOf(p), p.oc));
  Scope s = Scope::NewRootScope();
  Output x = Const(s, RandomTensor(TensorShape({1, 12, 12, 10}), -1, 1, 1));
  Output w = Const(s, RandomTensor(TensorShape({5, 5, 10, 20}), -1, 1, 2));
  Output dy = Const(s, dyv);
  const Tensor dx = RunOne(s, {}, Conv2DBackpropInput(s, x, w, dy, {1, 1},
                                                      "VALID"));
  const Tensor dw = RunOne(s, {}, Conv2DBackpropFilter(s, x, w, dy, {1, 1},
                                                       "VALID"));
  // dy[0, 0, 0, 0] reaches x's top-left window and w[:, :, :, 0].
  EXPECT_TRUE(std::isnan(dx.data<float>()[0]));
  EXPECT_TRUE(std::isnan(dw.data<float>()[0]));
  EXPECT_FALSE(std::isnan(dw.data<float>()[1]));
}

}  // namespace
}  // namespace ipuflow::ops
