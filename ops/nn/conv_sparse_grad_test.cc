#include "ops/nn/conv_sparse_grad.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/cpu_isa.h"
#include "core/testing/op_test.h"
#include "core/thread_pool.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/nn/conv2d_backprop.h"

namespace ipuflow::ops {
namespace {

using ::ipuflow::testing::RandomTensor;
using ::ipuflow::testing::RunOne;
using ::ipuflow::testing::TensorNear;

struct SparseCase {
  int64_t n, h, w, c, k, oc, stride;
};

int64_t Out(int64_t in, int64_t k, int64_t s) { return (in - k) / s + 1; }

Window2D SparseWindowOf(const SparseCase& p) {
  const int64_t oh = Out(p.h, p.k, p.stride), ow = Out(p.w, p.k, p.stride);
  return {p.n, p.h, p.w, p.c, p.k, p.k, p.stride, p.stride, oh, ow, 0, 0};
}

// dy as max pooling 2x2 and a ReLU pass it back to a convolution: one
// nonzero per window and channel, a third of those zeroed (about 17%).
Tensor PooledDy(const SparseCase& p, uint32_t seed) {
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
            if (q != keep || !alive)
              d[((b * oh + ii) * ow + jj) * p.oc + o] = 0;
          }
        }
  return t;
}

// The gradients by definition, in double: dx[x pixel] and dw[k, o] summed
// over every (output pixel, channel), zeros included.
void Reference(const SparseCase& p, const Tensor& x, const Tensor& w,
               const Tensor& dy, Tensor* dx, Tensor* dw) {
  const Window2D g = SparseWindowOf(p);
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

class SparseConvGradTest : public ::testing::TestWithParam<SparseCase> {};

TEST_P(SparseConvGradTest, BothGradientsMatchTheDefinition) {
  const SparseCase& p = GetParam();
  const Tensor xv = RandomTensor(TensorShape({p.n, p.h, p.w, p.c}), -1, 1, 1);
  const Tensor wv = RandomTensor(TensorShape({p.k, p.k, p.c, p.oc}), -1, 1, 2);
  const Tensor dyv = PooledDy(p, 3);
  // The ops take the sparse kernels on this dy.
  ASSERT_TRUE(UseSparseConvGrad(dyv.data<float>(), SparseWindowOf(p), p.oc));
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
        SparseCase{3, 12, 12, 10, 5, 20, 1},
        // Stride 2, a channel count that is not a multiple of 8, rows of
        // exactly two packets.
        SparseCase{2, 11, 9, 8, 2, 13, 2},
        // Rows longer than 8 packets (two register tiles), one channel.
        SparseCase{2, 7, 8, 24, 3, 1, 1},
        // More than 64 channels: the scalar scan.
        SparseCase{1, 6, 6, 16, 3, 70, 1}));

// The kernels called directly, on each ISA this process may use (AVX2,
// and AVX-512 unless IPUFLOW_MAX_ISA caps it): row lengths around the
// vector widths and their multiples, window heights that split into
// several register blocks, channel counts around the mask widths, and a
// NaN gradient in the last image's last channel.
struct DirectCase {
  SparseCase p;
  const char* what;
};

class SparseConvGradDirectTest : public ::testing::TestWithParam<DirectCase> {};

// Output plus kGuard floats past it, which no kernel may write.
constexpr int kGuard = 33;
constexpr float kGuardValue = 1234.5f;

struct SparseOutputs {
  std::vector<float> dx, dw;
};

SparseOutputs RunDirect(const ThreadPool& pool, CpuIsa isa, const SparseCase& p,
                        const Tensor& x, const Tensor& w, const Tensor& dy) {
  SparseOutputs out;
  out.dx.assign(x.NumElements() + kGuard, kGuardValue);
  out.dw.assign(w.NumElements() + kGuard, kGuardValue);
  SparseConvBackpropInput(pool, isa, dy.data<float>(), w.data<float>(),
                          out.dx.data(), SparseWindowOf(p), p.oc);
  SparseConvBackpropFilter(pool, isa, x.data<float>(), dy.data<float>(),
                           out.dw.data(), SparseWindowOf(p), p.oc);
  return out;
}

// got[i] within 1e-4 (absolute and relative) of want[i], NaN where it is
// NaN; the guard after it untouched.
void ExpectNear(const std::vector<float>& got, const Tensor& want,
                const std::string& what) {
  const int64_t n = want.NumElements();
  int64_t bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float a = got[i], b = want.data<float>()[i];
    const bool ok = std::isnan(b)
                        ? std::isnan(a)
                        : std::abs(a - b) <= 1e-4f + 1e-4f * std::abs(b);
    if (!ok && ++bad <= 5) {
      ADD_FAILURE() << what << "[" << i << "] = " << a << ", want " << b;
    }
  }
  EXPECT_EQ(bad, 0) << what;
  for (int i = 0; i < kGuard; ++i) {
    EXPECT_EQ(got[n + i], kGuardValue) << what << " guard " << i;
  }
}

// Bitwise equal, NaNs equal to NaNs.
bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) && std::isnan(b[i])) continue;
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) return false;
  }
  return true;
}

TEST_P(SparseConvGradDirectTest, MatchesTheDefinitionOnEveryIsa) {
  const SparseCase& p = GetParam().p;
  const Tensor x = RandomTensor(TensorShape({p.n, p.h, p.w, p.c}), -1, 1, 11);
  const Tensor w = RandomTensor(TensorShape({p.k, p.k, p.c, p.oc}), -1, 1, 12);
  Tensor dy = PooledDy(p, 13);
  // A NaN gradient mid-way through the last image, last channel.
  const int64_t oh = Out(p.h, p.k, p.stride), ow = Out(p.w, p.k, p.stride);
  const int64_t nan_at =
      (((p.n - 1) * oh + oh / 2) * ow + ow / 2) * p.oc + p.oc - 1;
  dy.data<float>()[nan_at] = std::numeric_limits<float>::quiet_NaN();
  Tensor want_dx, want_dw;
  Reference(p, x, w, dy, &want_dx, &want_dw);
  ASSERT_TRUE(std::isnan(want_dw.data<float>()[p.oc - 1]));

  ThreadPool pool("sparse-grad-test", 1);
  const SparseOutputs avx2 = RunDirect(pool, CpuIsa::kAvx2, p, x, w, dy);
  ExpectNear(avx2.dx, want_dx, "avx2 dx");
  ExpectNear(avx2.dw, want_dw, "avx2 dw");
  if (UsedIsa() == CpuIsa::kAvx512) {
    const SparseOutputs avx512 = RunDirect(pool, CpuIsa::kAvx512, p, x, w, dy);
    ExpectNear(avx512.dx, want_dx, "avx512 dx");
    ExpectNear(avx512.dw, want_dw, "avx512 dw");
    // The same fused multiply-adds in the same order per output element.
    EXPECT_TRUE(SameBits(avx2.dx, avx512.dx));
    EXPECT_TRUE(SameBits(avx2.dw, avx512.dw));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, SparseConvGradDirectTest,
    ::testing::Values(DirectCase{{3, 12, 12, 10, 5, 20, 1}, "convnet_row50"},
                      DirectCase{{2, 9, 20, 1, 5, 7, 1}, "c1_row5"},
                      DirectCase{{2, 18, 18, 1, 16, 3, 1}, "c1_row16"},
                      DirectCase{{2, 19, 19, 1, 17, 5, 1}, "c1_row17"},
                      DirectCase{{2, 10, 11, 2, 9, 17, 1}, "c2_row18_oc17"},
                      DirectCase{{2, 11, 9, 3, 7, 16, 2}, "c3_row21_stride2"},
                      DirectCase{{2, 12, 12, 4, 7, 33, 1}, "c4_row28_kh7"},
                      DirectCase{{2, 9, 9, 5, 4, 64, 1}, "c5_row20_oc64"},
                      DirectCase{{2, 7, 8, 24, 3, 1, 1}, "c24_row72_oc1"},
                      DirectCase{{2, 11, 11, 16, 9, 6, 1}, "c16_row144"},
                      DirectCase{{1, 12, 12, 13, 11, 9, 1}, "c13_row143"},
                      DirectCase{{1, 6, 6, 16, 3, 70, 1}, "oc70_scalar_scan"},
                      // More register blocks per window than the AVX-512 loops
                      // plan ahead (the filter gradient's, then both).
                      DirectCase{{1, 12, 11, 60, 10, 3, 1}, "c60_row600_kh10"},
                      DirectCase{{1, 18, 17, 50, 16, 2, 1}, "c50_row800_kh16"}),
    [](const ::testing::TestParamInfo<DirectCase>& info) {
      return std::string(info.param.what);
    });

TEST(SparseConvGradTest, ChoosesTheDenseKernelsWhereTheyWin) {
  const SparseCase b2{2, 12, 12, 10, 5, 20, 1};
  const Tensor sparse = PooledDy(b2, 4);
  const Tensor dense = RandomTensor(sparse.shape(), 0.5, 1, 5);
  EXPECT_TRUE(
      UseSparseConvGrad(sparse.data<float>(), SparseWindowOf(b2), b2.oc));
  EXPECT_FALSE(
      UseSparseConvGrad(dense.data<float>(), SparseWindowOf(b2), b2.oc));
  // Rows of 5 floats (the ConvNet's first convolution, 1 -> 10).
  const SparseCase b1{2, 28, 28, 1, 5, 10, 1};
  const Tensor b1_dy = PooledDy(b1, 6);
  EXPECT_FALSE(
      UseSparseConvGrad(b1_dy.data<float>(), SparseWindowOf(b1), b1.oc));
  // Windows that reach into SAME padding.
  Window2D same = SparseWindowOf(b2);
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
  // Past 32 (two AVX-512 vectors per step), NaNs in either half.
  std::vector<float> u(70, 0.0f);
  u[1] = u[17] = u[40] = std::numeric_limits<float>::quiet_NaN();
  u[69] = 3;
  EXPECT_DOUBLE_EQ(NonzeroFraction(u.data(), 70), 4.0 / 70);
  EXPECT_DOUBLE_EQ(NonzeroFraction(v.data(), 0), 0.0);
}

TEST(SparseConvGradTest, NaNGradientsReachBothOutputs) {
  const SparseCase p{1, 12, 12, 10, 5, 20, 1};
  Tensor dyv = PooledDy(p, 7);
  dyv.data<float>()[0] = std::numeric_limits<float>::quiet_NaN();
  ASSERT_TRUE(UseSparseConvGrad(dyv.data<float>(), SparseWindowOf(p), p.oc));
  Scope s = Scope::NewRootScope();
  Output x = Const(s, RandomTensor(TensorShape({1, 12, 12, 10}), -1, 1, 1));
  Output w = Const(s, RandomTensor(TensorShape({5, 5, 10, 20}), -1, 1, 2));
  Output dy = Const(s, dyv);
  const Tensor dx =
      RunOne(s, {}, Conv2DBackpropInput(s, x, w, dy, {1, 1}, "VALID"));
  const Tensor dw =
      RunOne(s, {}, Conv2DBackpropFilter(s, x, w, dy, {1, 1}, "VALID"));
  // dy[0, 0, 0, 0] reaches x's top-left window and w[:, :, :, 0].
  EXPECT_TRUE(std::isnan(dx.data<float>()[0]));
  EXPECT_TRUE(std::isnan(dw.data<float>()[0]));
  EXPECT_FALSE(std::isnan(dw.data<float>()[1]));
}

}  // namespace
}  // namespace ipuflow::ops
