// Conv2D and its backprops on shapes that take the direct kernels of
// conv_small.h (few output channels), against a direct
// double-precision reference, in both data formats, with strides and
// padding; plus the shapes on either side of UseSmallConv's limits. Both
// inner-loop variants: nn_test runs the AVX-512 ones on an AVX-512 CPU,
// nn_avx2_test the AVX2 ones; on an AVX-512 CPU both binaries also compare
// the two variants bitwise and check the AVX-512 loops' masked tails.
#include "ops/nn/conv_small.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "Eigen/Core"
#include "absl/strings/str_cat.h"
#include "core/cpu_isa.h"
#include "core/session.h"
#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/array/transpose.h"
#include "ops/nn/bias_add.h"
#include "ops/nn/conv2d.h"
#include "ops/nn/conv2d_backprop.h"
#include "ops/nn/conv_rows_avx512.h"
#include "ops/nn/conv_small_avx512.h"
#include "ops/nn/relu.h"

namespace ipuflow::ops {
namespace {

using ::ipuflow::testing::RandomTensor;
using ::ipuflow::testing::RunGraph;
using ::ipuflow::testing::TensorNear;

struct Case {
  int64_t n, h, w, c, kh, kw, oc, sh, sw;
  bool same;
  std::string DebugString() const {
    return absl::StrCat("x [", n, ",", h, ",", w, ",", c, "] filter [", kh, ",",
                        kw, ",", c, ",", oc, "] strides ", sh, ",", sw,
                        same ? " SAME" : " VALID");
  }
};

// y, dw and dx of the convolution by direct summation in double, TF's
// padding rules, NHWC.
struct Reference {
  Tensor y, dw, dx;
};

Reference Direct(const Case& p, const Tensor& x, const Tensor& w,
                 const Tensor& dy) {
  const int64_t oh = dy.dim(1), ow = dy.dim(2);
  const int64_t pt =
      p.same ? std::max<int64_t>((oh - 1) * p.sh + p.kh - p.h, 0) / 2 : 0;
  const int64_t pl =
      p.same ? std::max<int64_t>((ow - 1) * p.sw + p.kw - p.w, 0) / 2 : 0;
  std::vector<double> y(dy.NumElements()), dw(w.NumElements()),
      dx(x.NumElements());
  const float* px = x.data<float>();
  const float* pw = w.data<float>();
  const float* pdy = dy.data<float>();
  for (int64_t b = 0; b < p.n; ++b)
    for (int64_t i = 0; i < oh; ++i)
      for (int64_t j = 0; j < ow; ++j)
        for (int64_t u = 0; u < p.kh; ++u)
          for (int64_t v = 0; v < p.kw; ++v) {
            const int64_t ih = i * p.sh - pt + u, iw = j * p.sw - pl + v;
            if (ih < 0 || ih >= p.h || iw < 0 || iw >= p.w) continue;
            for (int64_t q = 0; q < p.c; ++q)
              for (int64_t o = 0; o < p.oc; ++o) {
                const int64_t xi = ((b * p.h + ih) * p.w + iw) * p.c + q;
                const int64_t wi = ((u * p.kw + v) * p.c + q) * p.oc + o;
                const int64_t yi = ((b * oh + i) * ow + j) * p.oc + o;
                y[yi] += double(px[xi]) * pw[wi];
                dw[wi] += double(px[xi]) * pdy[yi];
                dx[xi] += double(pw[wi]) * pdy[yi];
              }
          }
  auto to_tensor = [](const std::vector<double>& v, const TensorShape& s) {
    Tensor t(DType::kFloat32, s);
    for (size_t i = 0; i < v.size(); ++i) t.data<float>()[i] = float(v[i]);
    return t;
  };
  return {to_tensor(y, dy.shape()), to_tensor(dw, w.shape()),
          to_tensor(dx, x.shape())};
}

TensorShape OutputShape(const Case& p) {
  const int64_t oh = p.same ? (p.h + p.sh - 1) / p.sh : (p.h - p.kh) / p.sh + 1;
  const int64_t ow = p.same ? (p.w + p.sw - 1) / p.sw : (p.w - p.kw) / p.sw + 1;
  return {p.n, oh, ow, p.oc};
}

// Runs Conv2D, Conv2DBackpropFilter and Conv2DBackpropInput in `format`
// (NCHW transposes x, dy and the results) and checks them against Direct.
void ExpectMatchesDirect(const Case& p, const std::string& format) {
  SCOPED_TRACE(p.DebugString() + " " + format);
  const Tensor xv = RandomTensor({p.n, p.h, p.w, p.c}, -1, 1, 1);
  const Tensor wv = RandomTensor({p.kh, p.kw, p.c, p.oc}, -1, 1, 2);
  const Tensor dyv = RandomTensor(OutputShape(p), -1, 1, 3);
  const Reference ref = Direct(p, xv, wv, dyv);

  Scope s = Scope::NewRootScope();
  const bool nchw = format == "NCHW";
  auto in_format = [&](Output t) {
    return nchw ? Transpose(s, t, {0, 3, 1, 2}) : t;
  };
  auto to_nhwc = [&](Output t) {
    return nchw ? Transpose(s, t, {0, 2, 3, 1}) : t;
  };
  Output x = Placeholder(s, DType::kFloat32, xv.shape());
  Output w = Placeholder(s, DType::kFloat32, wv.shape());
  Output dy = Placeholder(s, DType::kFloat32, dyv.shape());
  const std::vector<int64_t> strides =
      nchw ? std::vector<int64_t>{1, 1, p.sh, p.sw}
           : std::vector<int64_t>{p.sh, p.sw};
  const std::string padding = p.same ? "SAME" : "VALID";
  Output xf = in_format(x), dyf = in_format(dy);
  Output y = to_nhwc(Conv2D(s, xf, w, strides, padding, format));
  Output dw = Conv2DBackpropFilter(s, xf, w, dyf, strides, padding, format);
  Output dx =
      to_nhwc(Conv2DBackpropInput(s, xf, w, dyf, strides, padding, format));
  auto out = RunGraph(s, {{x, xv}, {w, wv}, {dy, dyv}}, {y, dw, dx});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorNear((*out)[0], ref.y, 1e-4, 1e-4)) << "Conv2D";
  EXPECT_TRUE(TensorNear((*out)[1], ref.dw, 1e-4, 1e-4))
      << "Conv2DBackpropFilter";
  EXPECT_TRUE(TensorNear((*out)[2], ref.dx, 1e-4, 1e-4))
      << "Conv2DBackpropInput";
}

Window2D WindowOf(const Case& p) {
  const TensorShape y = OutputShape(p);
  Window2D g{p.n,  p.h,  p.w,      p.c,      p.kh, p.kw,
             p.sh, p.sw, y.dim(1), y.dim(2), 0,    0};
  return g;
}

// Random small shapes: 1-6 input channels, windows up to 5x5, 1-32 output
// channels (one to four AVX packets, padded or overlapping), strides 1-3.
std::vector<Case> RandomCases(int count) {
  std::mt19937 gen(2024);
  auto uniform = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(gen);
  };
  std::vector<Case> cases;
  while (static_cast<int>(cases.size()) < count) {
    Case p;
    p.n = uniform(1, 3);
    p.c = uniform(1, 6);
    p.kh = uniform(1, 5);
    p.kw = uniform(1, 5);
    p.oc = uniform(1, 32);
    p.sh = uniform(1, 3);
    p.sw = uniform(1, 3);
    p.same = uniform(0, 1) == 1;
    p.h = uniform(p.kh, 11);
    p.w = uniform(p.kw, 11);
    if (UseSmallConv(WindowOf(p), p.oc)) cases.push_back(p);
  }
  return cases;
}

TEST(SmallConvTest, RandomShapesMatchDirectSummation) {
  for (const Case& p : RandomCases(40)) {
    ExpectMatchesDirect(p, "NHWC");
    if (HasFailure()) return;
  }
}

TEST(SmallConvTest, RandomShapesMatchDirectSummationNchw) {
  for (const Case& p : RandomCases(10)) {
    ExpectMatchesDirect(p, "NCHW");
    if (HasFailure()) return;
  }
}

TEST(SmallConvTest, OutputChannelsAroundPacketSizes) {
  // AVX2: 1 and 3 (padded), 8 (one packet), 10, 17 and 20 (overlapping), 32
  // (four packets). AVX-512: a masked ymm up to 8, a zmm up to 16, a zmm
  // and a masked ymm up to 24, two zmm up to 32.
  for (int64_t oc : {1, 3, 7, 8, 9, 10, 16, 17, 20, 31, 32}) {
    ExpectMatchesDirect({2, 9, 8, 1, 5, 5, oc, 1, 1, false}, "NHWC");
    ExpectMatchesDirect({2, 9, 8, 2, 3, 3, oc, 2, 1, true}, "NHWC");
  }
}

TEST(SmallConvTest, TutorialFirstLayerOverSeveralShards) {
  // The ConvNet's first layer: enough work for the intra-op pool to split
  // the output rows over shards (filter partial sums added in order).
  ExpectMatchesDirect({6, 28, 28, 1, 5, 5, 10, 1, 1, false}, "NHWC");
  ExpectMatchesDirect({3, 28, 28, 1, 5, 5, 10, 2, 2, true}, "NHWC");
}

TEST(SmallConvTest, LongRowsWithPaddingRunInteriorPixels) {
  // Output rows of 16 pixels or more read interior patches as runs of a
  // row, beside the padded border ones; one zmm, two, and three AVX packets.
  for (int64_t oc : {10, 20, 32}) {
    ExpectMatchesDirect({2, 9, 20, 2, 3, 5, oc, 1, 1, true}, "NHWC");
    ExpectMatchesDirect({1, 7, 37, 1, 3, 4, oc, 2, 2, true}, "NHWC");
  }
}

TEST(SmallConvTest, ShapesOnEitherSideOfTheLimits) {
  const Case oc24_k1024{1, 4, 4, 256, 2, 2, 24, 1, 1, true};
  const Case oc24_k1028{1, 4, 4, 257, 2, 2, 24, 1, 1, true};
  const Case oc32_k64{1, 10, 10, 4, 4, 4, 32, 1, 1, true};
  const Case oc32_k75{1, 10, 10, 3, 5, 5, 32, 2, 1, true};
  const Case oc33_k9{1, 8, 8, 1, 3, 3, 33, 1, 1, false};
  constexpr int kLanes = Eigen::internal::unpacket_traits<
      Eigen::internal::packet_traits<float>::type>::size;
  if (kLanes == 8) {  // AVX: the limits conv_small.h documents.
    EXPECT_TRUE(UseSmallConv(WindowOf(oc24_k1024), 24));
    EXPECT_FALSE(UseSmallConv(WindowOf(oc24_k1028), 24));
    EXPECT_TRUE(UseSmallConv(WindowOf(oc32_k64), 32));
    EXPECT_FALSE(UseSmallConv(WindowOf(oc32_k75), 32));
  }
  EXPECT_FALSE(UseSmallConv(WindowOf(oc33_k9), 33));
  for (const Case& p : {oc24_k1024, oc24_k1028, oc32_k64, oc32_k75, oc33_k9}) {
    ExpectMatchesDirect(p, "NHWC");
  }
}

TEST(SmallConvTest, UsesTheExpectedVariant) {
  // nn_avx2_test sets IPUFLOW_MAX_ISA=avx2: the AVX2 loops, whatever the CPU.
  const char* cap = std::getenv("IPUFLOW_MAX_ISA");
  if (cap != nullptr && std::strcmp(cap, "avx2") == 0) {
    EXPECT_EQ(UsedIsa(), CpuIsa::kAvx2);
  }
  // AVX-512 where the channels fill whole zmm registers (9-16, 25-32).
  for (int64_t oc : {9, 10, 16, 25, 32}) {
    EXPECT_EQ(SmallConvIsa(oc), UsedIsa()) << oc;
  }
  for (int64_t oc : {1, 8, 17, 20, 24, 33}) {
    EXPECT_EQ(SmallConvIsa(oc), CpuIsa::kAvx2) << oc;
  }
  // Conv2D with 9-12 or 17-24 channels on the tutorial ConvNet's conv2
  // (rows of 8 pixels) and with 20 on rows of 12: AVX-512's pixel-row
  // loop. Not with a short patch (conv1's 25), with 24 channels on rows of
  // 12, nor on rows of 6 (but for 17-24 channels on rows of 7).
  const bool avx512 = UsedIsa() == CpuIsa::kAvx512;
  const Window2D conv2 = WindowOf({40, 12, 12, 10, 5, 5, 20, 1, 1, false});
  for (int64_t oc : {9, 10, 12, 17, 20, 24}) {
    EXPECT_EQ(SmallConvForwardByRows(conv2, oc), avx512) << oc;
  }
  for (int64_t oc : {1, 8, 13, 16, 25, 32}) {
    EXPECT_FALSE(SmallConvForwardByRows(conv2, oc)) << oc;
  }
  const Window2D rows12 = WindowOf({40, 16, 16, 16, 5, 5, 20, 1, 1, false});
  EXPECT_EQ(SmallConvForwardByRows(rows12, 20), avx512);
  EXPECT_FALSE(SmallConvForwardByRows(rows12, 24));
  const Window2D conv1 = WindowOf({40, 28, 28, 1, 5, 5, 10, 1, 1, false});
  EXPECT_FALSE(SmallConvForwardByRows(conv1, 10));
  EXPECT_FALSE(SmallConvForwardByRows(conv1, 20));
  const Window2D rows6 = WindowOf({40, 10, 10, 16, 5, 5, 20, 1, 1, false});
  EXPECT_FALSE(SmallConvForwardByRows(rows6, 10));
  EXPECT_FALSE(SmallConvForwardByRows(rows6, 20));
  EXPECT_EQ(SmallConvForwardByRows(
                WindowOf({40, 11, 11, 16, 5, 5, 20, 1, 1, false}), 20),
            avx512);
}

// y = relu(conv(x, w) + b) by the fused Conv2D -> BiasAdd -> Relu kernel
// (conv_small.h's row epilogue), dw by Conv2DBackpropFilter, NHWC.
struct Outputs {
  Tensor y, dw;
};

Outputs RunFused(const Case& p, const Tensor& xv, const Tensor& wv,
                 const Tensor& bv, const Tensor& dyv) {
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, xv.shape());
  Output w = Placeholder(s, DType::kFloat32, wv.shape());
  Output b = Placeholder(s, DType::kFloat32, bv.shape());
  Output dy = Placeholder(s, DType::kFloat32, dyv.shape());
  const std::string padding = p.same ? "SAME" : "VALID";
  Output y = Relu(s, BiasAdd(s, Conv2D(s, x, w, {p.sh, p.sw}, padding), b));
  Output dw = Conv2DBackpropFilter(s, x, w, dy, {p.sh, p.sw}, padding);
  SessionOptions options;
  options.fuse = true;
  Session session(s.graph(), options);
  std::vector<Tensor> out;
  const FeedList feeds = {{x, xv}, {w, wv}, {b, bv}, {dy, dyv}};
  IPU_CHECK_OK(session.Run(feeds, {y, dw}, {}, &out));
  absl::StatusOr<Program*> program = session.GetProgram(feeds, {y, dw}, {});
  IPU_CHECK_OK(program.status());
  EXPECT_GE((*program)->num_fused_away(), 2) << "Conv2D + BiasAdd + Relu";
  return {out[0], out[1]};
}

bool BitwiseEqual(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() &&
         std::memcmp(a.data<float>(), b.data<float>(),
                     a.NumElements() * sizeof(float)) == 0;
}

// Both variants on the same inputs (the override forces the AVX-512 loops
// for every width), the fused epilogue included: the
// AVX-512 loops sum each output in the AVX2 loops' order, so the results
// are bitwise equal; both also match the double reference.
TEST(SmallConvTest, BothVariantsAgreeBitwiseWithAFusedEpilogue) {
  if (DetectedIsa() != CpuIsa::kAvx512) GTEST_SKIP() << "no AVX-512";
  for (int64_t oc : {1, 3, 10, 16, 17, 20, 32}) {
    for (const Case& p : {Case{2, 12, 12, 10, 5, 5, oc, 1, 1, false},
                          Case{3, 11, 9, 2, 5, 5, oc, 2, 2, true},
                          Case{1, 28, 28, 1, 5, 5, oc, 1, 1, true}}) {
      SCOPED_TRACE(p.DebugString());
      const Tensor xv = RandomTensor({p.n, p.h, p.w, p.c}, -1, 1, 4);
      const Tensor wv = RandomTensor({p.kh, p.kw, p.c, p.oc}, -1, 1, 5);
      const Tensor bv = RandomTensor({p.oc}, -1, 1, 6);
      const Tensor dyv = RandomTensor(OutputShape(p), -1, 1, 7);
      const Reference ref = Direct(p, xv, wv, dyv);
      Tensor ref_y(DType::kFloat32, ref.y.shape());
      for (int64_t i = 0; i < ref_y.NumElements(); ++i) {
        ref_y.data<float>()[i] =
            std::max(0.0f, ref.y.data<float>()[i] + bv.data<float>()[i % p.oc]);
      }
      SetSmallConvIsaForTesting(CpuIsa::kAvx2);
      const Outputs avx2 = RunFused(p, xv, wv, bv, dyv);
      SetSmallConvIsaForTesting(CpuIsa::kAvx512);
      const Outputs avx512 = RunFused(p, xv, wv, bv, dyv);
      SetSmallConvIsaForTesting(std::nullopt);
      EXPECT_TRUE(BitwiseEqual(avx2.y, avx512.y)) << "Conv2D";
      EXPECT_TRUE(BitwiseEqual(avx2.dw, avx512.dw)) << "Conv2DBackpropFilter";
      EXPECT_TRUE(TensorNear(avx512.y, ref_y, 1e-4, 1e-4)) << "Conv2D";
      EXPECT_TRUE(TensorNear(avx512.dw, ref.dw, 1e-4, 1e-4))
          << "Conv2DBackpropFilter";
      if (HasFailure()) return;
    }
  }
}

// Conv2D by AVX-512's pixel-row loop (9-12, 17-24 channels; forced for
// every shape) against the AVX2 channel packets, bitwise, and both against
// the double reference: the tutorial ConvNet's conv2 at batch 40, SAME
// padding, strides 2 and 3, rows of 5 and 7 pixels (a block each), of 9,
// 12, 19 and 20 (blocks spanning two rows), odd numbers of blocks (the
// last one without a zmm pair), one image.
TEST(SmallConvTest, PixelRowLoopAgreesBitwiseWithAvx2) {
  if (DetectedIsa() != CpuIsa::kAvx512) GTEST_SKIP() << "no AVX-512";
  const std::vector<Case> cases = {
      {40, 12, 12, 10, 5, 5, 20, 1, 1, false},  // conv2.
      {2, 12, 12, 10, 5, 5, 20, 1, 1, true},
      {3, 11, 9, 2, 5, 5, 17, 2, 2, true},
      {2, 13, 15, 3, 3, 3, 23, 2, 2, false},
      {2, 10, 26, 4, 3, 4, 24, 1, 3, true},
      {1, 13, 13, 10, 5, 5, 20, 1, 1, false},
      {2, 9, 20, 2, 3, 5, 17, 1, 1, true},
      {1, 7, 37, 1, 3, 4, 23, 2, 2, true},
      {1, 12, 12, 10, 5, 5, 24, 1, 1, false},
      {1, 6, 5, 3, 2, 2, 18, 1, 1, true},
      {1, 12, 12, 10, 5, 5, 21, 2, 1, true},
      {2, 16, 16, 16, 5, 5, 20, 1, 1, false},
      {2, 12, 12, 10, 5, 5, 10, 1, 1, false},
      {1, 7, 37, 1, 3, 4, 12, 2, 2, true},
      {2, 13, 15, 3, 3, 3, 9, 2, 2, false},
      {1, 13, 13, 10, 5, 5, 11, 1, 1, false},
  };
  for (const Case& p : cases) {
    SCOPED_TRACE(p.DebugString());
    ASSERT_TRUE(UseSmallConv(WindowOf(p), p.oc));
    const Tensor xv = RandomTensor({p.n, p.h, p.w, p.c}, -1, 1, 8);
    const Tensor wv = RandomTensor({p.kh, p.kw, p.c, p.oc}, -1, 1, 9);
    const Tensor dyv = RandomTensor(OutputShape(p), -1, 1, 10);
    const Reference ref = Direct(p, xv, wv, dyv);
    auto run = [&](CpuIsa isa) {
      SetSmallConvIsaForTesting(isa);
      Scope s = Scope::NewRootScope();
      Output x = Placeholder(s, DType::kFloat32, xv.shape());
      Output w = Placeholder(s, DType::kFloat32, wv.shape());
      Output y = Conv2D(s, x, w, {p.sh, p.sw}, p.same ? "SAME" : "VALID");
      auto out = RunGraph(s, {{x, xv}, {w, wv}}, {y});
      SetSmallConvIsaForTesting(std::nullopt);
      IPU_CHECK_OK(out.status());
      return (*out)[0];
    };
    const Tensor avx2 = run(CpuIsa::kAvx2);
    SetSmallConvRowsForTesting(true);
    SetSmallConvIsaForTesting(CpuIsa::kAvx512);
    EXPECT_TRUE(SmallConvForwardByRows(WindowOf(p), p.oc));
    const Tensor rows = run(CpuIsa::kAvx512);
    SetSmallConvRowsForTesting(std::nullopt);
    EXPECT_TRUE(BitwiseEqual(avx2, rows));
    EXPECT_TRUE(TensorNear(rows, ref.y, 1e-4, 1e-4));
    if (HasFailure()) return;
  }
}

// The pixel-row loop called directly on rows [1, 3) of an image of 5 rows
// of 11 pixels (blocks spanning rows, a partial last one): it writes
// those rows' oc floats per pixel and nothing else (guard values around).
TEST(SmallConvTest, PixelRowLoopWritesOnlyItsRows) {
  if (DetectedIsa() != CpuIsa::kAvx512) GTEST_SKIP() << "no AVX-512";
  constexpr float kGuard = -12345.0f;
  for (int64_t oc : {9, 12, 17, 20, 24}) {
    SCOPED_TRACE(oc);
    const avx512::ConvRowsShape s{7, 13, 3, 3, 3, 1, 1, 5, 11, 0, 0, oc};
    std::mt19937 gen(oc);
    std::uniform_real_distribution<float> u(-1, 1);
    std::vector<float> x(s.h * s.w * s.c), w(s.kh * s.kw * s.c * oc);
    for (float& v : x) v = u(gen);
    for (float& v : w) v = u(gen);
    std::vector<float> xp(avx512::ConvRowsImageFloats(s), 0.0f);
    avx512::ConvRowsRelayout(s, x.data(), xp.data());
    const int64_t row = s.ow * oc, pad = 64;
    std::vector<float> y(pad + s.oh * row + pad, kGuard);
    avx512::ConvRowsForward(s, xp.data(), w.data(), 1, 3, y.data() + pad);
    for (int64_t i = 0; i < static_cast<int64_t>(y.size()); ++i) {
      const int64_t at = i - pad, oh = at / row;
      if (at < 0 || at >= s.oh * row || oh < 1 || oh >= 3) {
        EXPECT_EQ(y[i], kGuard) << at;
        continue;
      }
      const int64_t ow = at % row / oc, o = at % oc;
      double want = 0;
      for (int64_t kh = 0; kh < s.kh; ++kh)
        for (int64_t kw = 0; kw < s.kw; ++kw)
          for (int64_t c = 0; c < s.c; ++c) {
            want += double(x[((oh + kh) * s.w + ow + kw) * s.c + c]) *
                    w[((kh * s.kw + kw) * s.c + c) * oc + o];
          }
      EXPECT_NEAR(y[i], want, 1e-5) << oh << " " << ow << " " << o;
    }
    if (HasFailure()) return;
  }
}

// The AVX-512 loops called directly: outputs of oc channels per pixel,
// pixels in a scattered order, guard values after y; the filter sums read
// only oc floats of each dy row (the last row ends the allocation's valid
// data, its padding holds NaN, which any read would spread into the sums).
TEST(SmallConvTest, Avx512LoopsStayInsideTheirChannels) {
  if (DetectedIsa() != CpuIsa::kAvx512) GTEST_SKIP() << "no AVX-512";
  constexpr float kGuard = -12345.0f;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int64_t oc : {1, 3, 10, 16, 17, 20, 32}) {
    SCOPED_TRACE(oc);
    const int64_t k = 7, pixels = 11;
    const int64_t lanes = avx512::SmallConvPackedWidth(oc);
    std::mt19937 gen(oc);
    std::uniform_real_distribution<float> u(-1, 1);
    std::vector<float> x(pixels * k + 3), w(k * lanes, 0.0f);
    for (float& v : x) v = u(gen);
    for (int64_t j = 0; j < k; ++j) {
      for (int64_t o = 0; o < oc; ++o) w[j * lanes + o] = u(gen);
    }
    // Pixel i's patch: x[3 * i + off[j]], off = {0, 2, 4, ...}; outputs in
    // reverse order.
    std::vector<const float*> src;
    std::vector<int64_t> pixel;
    std::vector<ptrdiff_t> off;
    for (int64_t j = 0; j < k; ++j) off.push_back(2 * j);
    for (int64_t i = 0; i < pixels; ++i) {
      src.push_back(&x[3 * i]);
      pixel.push_back(pixels - 1 - i);
    }
    std::vector<float> y(pixels * oc + 32, kGuard);
    avx512::SmallConvForwardSet(src.data(), pixel.data(), pixels, off.data(), k,
                                w.data(), oc, y.data());
    for (int64_t i = 0; i < pixels; ++i) {
      for (int64_t o = 0; o < oc; ++o) {
        double want = 0;
        for (int64_t j = 0; j < k; ++j) {
          want += double(src[i][off[j]]) * w[j * lanes + o];
        }
        EXPECT_NEAR(y[pixel[i] * oc + o], want, 1e-5) << i << " " << o;
      }
    }
    for (size_t i = pixels * oc; i < y.size(); ++i) EXPECT_EQ(y[i], kGuard);

    std::vector<float> dy(pixels * oc + 32, nan);
    for (int64_t i = 0; i < pixels * oc; ++i) dy[i] = u(gen);
    std::vector<float> sum(k * lanes, 0.0f);
    avx512::SmallConvFilterSet(src.data(), pixel.data(), pixels, off.data(), k,
                               dy.data(), oc, 0, oc, sum.data());
    for (int64_t j = 0; j < k; ++j) {
      for (int64_t o = 0; o < oc; ++o) {
        double want = 0;
        for (int64_t i = 0; i < pixels; ++i) {
          want += double(src[i][off[j]]) * dy[pixel[i] * oc + o];
        }
        EXPECT_NEAR(sum[j * lanes + o], want, 1e-5) << j << " " << o;
      }
      for (int64_t o = oc; o < lanes; ++o) {
        EXPECT_FALSE(std::isnan(sum[j * lanes + o])) << j << " " << o;
      }
    }
    if (HasFailure()) return;
  }
}

}  // namespace
}  // namespace ipuflow::ops
