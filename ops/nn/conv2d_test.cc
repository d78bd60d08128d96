#include "ops/nn/conv2d.h"

#include <ostream>
#include <string>
#include <vector>

#include "core/gradients.h"
#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/nn/conv2d_backprop.h"
#include "ops/testing/half_check.h"

namespace ipuflow::ops {
namespace {

using ::ipuflow::testing::CompareHalfToFloat;
using ::ipuflow::testing::HalfCheck;
using ::ipuflow::testing::MaxGradientError;
using ::ipuflow::testing::RandomTensor;
using ::ipuflow::testing::RunOne;
using ::ipuflow::testing::TensorNear;
using ::ipuflow::testing::ToFloat;
using ::ipuflow::testing::ToHalf;

// Direct convolution of NHWC `x` by `w` [kh,kw,c,oc], TF's padding rules.
Tensor NaiveConv(const Tensor& x, const Tensor& w, int sh, int sw, bool same) {
  const int64_t n = x.dim(0), h = x.dim(1), wd = x.dim(2), c = x.dim(3);
  const int64_t kh = w.dim(0), kw = w.dim(1), oc = w.dim(3);
  const int64_t oh = same ? (h + sh - 1) / sh : (h - kh) / sh + 1;
  const int64_t ow = same ? (wd + sw - 1) / sw : (wd - kw) / sw + 1;
  const int64_t pt =
      same ? std::max<int64_t>((oh - 1) * sh + kh - h, 0) / 2 : 0;
  const int64_t pl =
      same ? std::max<int64_t>((ow - 1) * sw + kw - wd, 0) / 2 : 0;
  Tensor y = Tensor::Filled(DType::kFloat32, {n, oh, ow, oc}, 0);
  const float* px = x.data<float>();
  const float* pw = w.data<float>();
  float* py = y.data<float>();
  for (int64_t b = 0; b < n; ++b)
    for (int64_t i = 0; i < oh; ++i)
      for (int64_t j = 0; j < ow; ++j)
        for (int64_t o = 0; o < oc; ++o) {
          double sum = 0;
          for (int64_t u = 0; u < kh; ++u)
            for (int64_t v = 0; v < kw; ++v)
              for (int64_t q = 0; q < c; ++q) {
                const int64_t ih = i * sh - pt + u, iw = j * sw - pl + v;
                if (ih < 0 || ih >= h || iw < 0 || iw >= wd) continue;
                sum += px[((b * h + ih) * wd + iw) * c + q] *
                       pw[((u * kw + v) * c + q) * oc + o];
              }
          py[((b * oh + i) * ow + j) * oc + o] = static_cast<float>(sum);
        }
  return y;
}

// NHWC <-> NCHW.
Tensor Permute(const Tensor& t, bool to_nchw) {
  const int64_t n = t.dim(0);
  const int64_t a = to_nchw ? t.dim(1) * t.dim(2) : t.dim(1);
  const int64_t b = to_nchw ? t.dim(3) : t.dim(2) * t.dim(3);
  const TensorShape shape =
      to_nchw ? TensorShape({t.dim(0), t.dim(3), t.dim(1), t.dim(2)})
              : TensorShape({t.dim(0), t.dim(2), t.dim(3), t.dim(1)});
  Tensor out(DType::kFloat32, shape);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t p = 0; p < a; ++p)
      for (int64_t q = 0; q < b; ++q)
        out.data<float>()[(i * b + q) * a + p] =
            t.data<float>()[(i * a + p) * b + q];
  return out;
}

TEST(Conv2DTest, TinyHandComputed) {
  // x = [[1,2,3],[4,5,6],[7,8,9]], w = [[1,0],[0,-1]]: y = x[i,j] - x[i+1,j+1].
  Scope s = Scope::NewRootScope();
  Output x = Const<float>(s, {1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 3, 3, 1});
  Output w = Const<float>(s, {1, 0, 0, -1}, {2, 2, 1, 1});
  Output valid = Conv2D(s, x, w, {1, 1}, "VALID");
  EXPECT_TRUE(TensorNear(RunOne(s, {}, valid), {-4, -4, -4, -4}, {1, 2, 2, 1}));
  // SAME pads one zero row/column after (total padding 1, none before).
  Output same = Conv2D(s, x, w, {1, 1}, "SAME");
  EXPECT_TRUE(TensorNear(RunOne(s, {}, same), {-4, -4, 3, -4, -4, 6, 7, 8, 9},
                         {1, 3, 3, 1}));
  // Stride 2, SAME: rows/cols 0 and 2.
  Output strided = Conv2D(s, x, w, {2, 2}, "SAME");
  EXPECT_TRUE(TensorNear(RunOne(s, {}, strided), {-4, 3, 7, 9}, {1, 2, 2, 1}));
}

struct ConvCase {
  std::vector<int64_t> x_shape;  // NHWC.
  std::vector<int64_t> w_shape;
  int stride;
  std::string padding;
};

// Without it gtest prints a case byte by byte, its uninitialised padding
// included (valgrind reports each read).
void PrintTo(const ConvCase& c, std::ostream* os) {
  *os << "x " << TensorShape(c.x_shape).DebugString() << " w "
      << TensorShape(c.w_shape).DebugString() << " stride " << c.stride << " "
      << c.padding;
}

class Conv2DReferenceTest : public ::testing::TestWithParam<ConvCase> {};

TEST_P(Conv2DReferenceTest, MatchesDirectConvolutionInBothFormats) {
  const ConvCase& p = GetParam();
  const Tensor xv = RandomTensor(TensorShape(p.x_shape), -1, 1, 1);
  const Tensor wv = RandomTensor(TensorShape(p.w_shape), -1, 1, 2);
  const Tensor expected =
      NaiveConv(xv, wv, p.stride, p.stride, p.padding == "SAME");
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, {-1, -1, -1, p.x_shape[3]});
  Output w = Const(s, wv);
  Output y = Conv2D(s, x, w, {p.stride, p.stride}, p.padding);
  EXPECT_TRUE(TensorNear(RunOne(s, {{x, xv}}, y), expected, 1e-4, 1e-4));

  const Tensor xc_value = Permute(xv, true);
  Output xc = Placeholder(s, DType::kFloat32, xc_value.shape());
  Output yc = Conv2D(s, xc, w, {1, 1, p.stride, p.stride}, p.padding, "NCHW");
  const Tensor got = RunOne(s, {{xc, xc_value}}, yc);
  ASSERT_TRUE(got.valid());
  EXPECT_TRUE(TensorNear(Permute(got, false), expected, 1e-4, 1e-4));
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, Conv2DReferenceTest,
    ::testing::Values(ConvCase{{2, 5, 5, 3}, {3, 3, 3, 4}, 1, "VALID"},
                      ConvCase{{2, 5, 5, 3}, {3, 3, 3, 4}, 1, "SAME"},
                      ConvCase{{2, 7, 6, 2}, {3, 2, 2, 3}, 2, "VALID"},
                      ConvCase{{2, 7, 6, 2}, {3, 3, 2, 3}, 2, "SAME"},
                      ConvCase{{1, 4, 4, 2}, {1, 1, 2, 3}, 1, "VALID"},
                      ConvCase{{1, 6, 6, 1}, {4, 4, 1, 2}, 2, "SAME"}));

TEST(Conv2DTest, InfersShapesWithUnknownBatch) {
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, {-1, 28, 28, 1});
  Output w = Placeholder(s, DType::kFloat32, {5, 5, 1, 32});
  EXPECT_EQ(Conv2D(s, x, w, {2, 2}, "SAME").shape().DebugString(),
            "[?,14,14,32]");
  EXPECT_EQ(Conv2D(s, x, w, {1, 1}, "VALID").shape().DebugString(),
            "[?,24,24,32]");
  Output xc = Placeholder(s, DType::kFloat32, {8, 1, 28, 28});
  EXPECT_EQ(
      Conv2D(s, xc, w, {1, 1, 1, 1}, "VALID", "NCHW").shape().DebugString(),
      "[8,32,24,24]");
  ASSERT_TRUE(s.ok()) << s.status();
}

TEST(Conv2DTest, ChannelMismatchNamesShapesAndFormat) {
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, {1, 3, 8, 8});
  Output w = Placeholder(s, DType::kFloat32, {3, 3, 8, 4});
  Conv2D(s.WithOpName("conv"), x, w, {1, 1}, "SAME", "NCHW");
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string msg(s.status().message());
  EXPECT_NE(msg.find("Conv2D 'conv'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[1,3,8,8]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[3,3,8,4]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("NCHW"), std::string::npos) << msg;
}

TEST(Conv2DTest, ChannelMismatchAtRunTime) {
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, {-1, 4, 4, -1});
  Output w = Const(s, RandomTensor({2, 2, 3, 1}, -1, 1, 1));
  Output y = Conv2D(s.WithOpName("conv"), x, w, {1, 1}, "VALID");
  auto out = ::ipuflow::testing::RunGraph(
      s, {{x, RandomTensor({1, 4, 4, 2}, 0, 1, 1)}}, {y});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find("Conv2D 'conv'"), std::string::npos);
  EXPECT_NE(out.status().message().find("[1,4,4,2]"), std::string::npos)
      << out.status();
}

TEST(Conv2DTest, AttributeErrors) {
  Output x, w;
  auto expect_error = [&](const std::vector<int64_t>& strides,
                          const std::string& padding, const std::string& format,
                          const std::string& needle) {
    Scope s = Scope::NewRootScope();
    x = Placeholder(s, DType::kFloat32, {1, 4, 4, 1});
    w = Placeholder(s, DType::kFloat32, {5, 5, 1, 1});
    Conv2D(s.WithOpName("c"), x, w, strides, padding, format);
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(s.status().message().find("Conv2D 'c'"), std::string::npos);
    EXPECT_NE(s.status().message().find(needle), std::string::npos)
        << s.status();
  };
  expect_error({1, 1}, "FULL", "NHWC",
               "padding must be \"VALID\" or \"SAME\", got \"FULL\"");
  expect_error({1, 1}, "SAME", "NWHC", "got \"NWHC\"");
  expect_error({1, 1, 1}, "SAME", "NHWC",
               "strides [1,1,1] must have 2 entries");
  expect_error({2, 1, 1, 1}, "SAME", "NHWC", "batch and channel");
  expect_error({0, 1}, "SAME", "NHWC", "must be positive");
  expect_error({1, 1}, "VALID", "NHWC",
               "window height 5 is larger than the input height 4");
}

TEST(Conv2DTest, GradientsWrtInputAndFilter) {
  for (const std::string format : {"NHWC", "NCHW"}) {
    for (const std::string padding : {"SAME", "VALID"}) {
      for (int stride : {1, 2}) {
        Scope s = Scope::NewRootScope();
        const TensorShape xs = format == "NHWC" ? TensorShape({2, 5, 4, 2})
                                                : TensorShape({2, 2, 5, 4});
        Output x = Placeholder(s, DType::kFloat32, xs);
        Output w = Placeholder(s, DType::kFloat32, {3, 2, 2, 3});
        Output y = Conv2D(s, x, w, {stride, stride}, padding, format);
        auto err = MaxGradientError(
            s, {x, w},
            {RandomTensor(xs, -1, 1, 3), RandomTensor({3, 2, 2, 3}, -1, 1, 4)},
            y);
        ASSERT_TRUE(err.ok()) << err.status();
        EXPECT_LT(*err, 1e-3) << format << " " << padding << " " << stride;
      }
    }
  }
}

TEST(Conv2DTest, SecondOrderGradientsOfBackprops) {
  const Tensor xv = RandomTensor({1, 5, 5, 2}, -1, 1, 5);
  const Tensor wv = RandomTensor({3, 3, 2, 2}, -1, 1, 6);
  const Tensor dyv = RandomTensor({1, 3, 3, 2}, -1, 1, 7);
  {
    // Conv2DBackpropInput reads only the shape of its input.
    Scope s = Scope::NewRootScope();
    Output w = Placeholder(s, DType::kFloat32, wv.shape());
    Output dy = Placeholder(s, DType::kFloat32, dyv.shape());
    Output dx = Conv2DBackpropInput(s, Const(s, xv), w, dy, {2, 2}, "SAME");
    auto err = MaxGradientError(s, {w, dy}, {wv, dyv}, dx);
    ASSERT_TRUE(err.ok()) << err.status();
    EXPECT_LT(*err, 1e-3);
  }
  {
    // Conv2DBackpropFilter reads only the shape of its filter.
    Scope s = Scope::NewRootScope();
    Output x = Placeholder(s, DType::kFloat32, xv.shape());
    Output dy = Placeholder(s, DType::kFloat32, dyv.shape());
    Output dw = Conv2DBackpropFilter(s, x, Const(s, wv), dy, {2, 2}, "SAME");
    auto err = MaxGradientError(s, {x, dy}, {xv, dyv}, dw);
    ASSERT_TRUE(err.ok()) << err.status();
    EXPECT_LT(*err, 1e-3);
  }
}

TEST(Conv2DTest, BackpropRejectsMismatchedDy) {
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, {1, 5, 5, 2});
  Output w = Placeholder(s, DType::kFloat32, {3, 3, 2, 2});
  Output dy = Placeholder(s, DType::kFloat32, {1, 5, 5, 2});
  Conv2DBackpropInput(s.WithOpName("bp"), x, w, dy, {2, 2}, "SAME");
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find(
                "Conv2DBackpropInput 'bp': input 'dy' has shape [1,5,5,2] but "
                "the forward op's output has shape [1,3,3,2]"),
            std::string::npos)
      << s.status();
}

TEST(Conv2DTest, Float16KernelsAndGradientsMatchFloat32) {
  struct Case {
    TensorShape x, w;
    const char* padding;
    const char* format;
  };
  // The tutorial's two layers (the direct kernel of conv_small.h), a wide
  // layer (the GEMM path), a strided one and NCHW.
  const Case cases[] = {
      {{2, 12, 12, 1}, {5, 5, 1, 10}, "VALID", "NHWC"},
      {{2, 8, 8, 10}, {5, 5, 10, 20}, "VALID", "NHWC"},
      {{2, 6, 6, 8}, {3, 3, 8, 40}, "SAME", "NHWC"},
      {{2, 4, 7, 7}, {3, 3, 4, 6}, "SAME", "NCHW"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<HalfCheck> r = CompareHalfToFloat(
        [&](const Scope& s, const std::vector<Output>& in) {
          return Conv2D(s, in[0], in[1], {1, 1}, c.padding, c.format);
        },
        {RandomTensor(c.x, -1, 1, 1), RandomTensor(c.w, -0.5, 0.5, 2)});
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->dtype, DType::kFloat16);
    EXPECT_LT(r->forward_error, 2e-3) << c.x.DebugString();
    EXPECT_LT(r->gradient_error, 2e-3) << c.x.DebugString();
  }
}

// 2048 then 64 x 1/16 as float16: the sum is 2052 with float partials and
// 2048 with half partials (blocks of 16 terms, the running sum rounded to
// float16 after each; spacing 2 at 2048; see MatMulTest).
Tensor LongSumValues(const TensorShape& shape) {
  std::vector<float> v(65, 0.0625f);
  v[0] = 2048;
  return ToHalf(Tensor::FromVector<float>(v, shape));
}

TEST(Conv2DTest, HalfPartialsRoundEachProductsRunningSum) {
  for (const char* p : {"float", "half"}) {
    const float want = std::string(p) == "float" ? 2052 : 2048;
    const ConvOptions o{"NHWC", p};
    Scope s = Scope::NewRootScope();
    // Forward: one 1x65 patch.
    Output x = Const(s, LongSumValues({1, 1, 65, 1}));
    Output w = Const(s, Tensor::Filled(DType::kFloat16, {1, 65, 1, 1}, 1));
    EXPECT_TRUE(
        TensorNear(ToFloat(RunOne(s, {}, Conv2D(s, x, w, {1, 1}, "VALID", o))),
                   {want}, {1, 1, 1, 1}, 0, 0))
        << p;
    // Filter gradient of a 1x1 convolution: a sum over 65 pixels.
    Output w1 = Const(s, Tensor::Filled(DType::kFloat16, {1, 1, 1, 1}, 1));
    Output ones = Const(s, Tensor::Filled(DType::kFloat16, {1, 1, 65, 1}, 1));
    EXPECT_TRUE(TensorNear(
        ToFloat(RunOne(
            s, {}, Conv2DBackpropFilter(s, x, w1, ones, {1, 1}, "VALID", o))),
        {want}, {1, 1, 1, 1}, 0, 0))
        << p;
    // Input gradient of a 1x1 convolution to 65 channels: a sum over them.
    Output x1 = Const(s, Tensor::Filled(DType::kFloat16, {1, 1, 1, 1}, 0));
    Output w65 = Const(s, Tensor::Filled(DType::kFloat16, {1, 1, 1, 65}, 1));
    Output dy = Const(s, LongSumValues({1, 1, 1, 65}));
    EXPECT_TRUE(TensorNear(
        ToFloat(RunOne(
            s, {}, Conv2DBackpropInput(s, x1, w65, dy, {1, 1}, "VALID", o))),
        {want}, {1, 1, 1, 1}, 0, 0))
        << p;
  }
}

TEST(Conv2DTest, HalfPartialsStayCloseOnOrdinaryValues) {
  // On values of one magnitude, half partials only add float16 rounding.
  for (const char* format : {"NHWC", "NCHW"}) {
    absl::StatusOr<HalfCheck> r = CompareHalfToFloat(
        [&](const Scope& s, const std::vector<Output>& in) {
          return Conv2D(s, in[0], in[1], {1, 1}, "SAME",
                        ConvOptions{format, "half"});
        },
        {RandomTensor({2, 6, 6, 6}, 0, 1, 3),
         RandomTensor({3, 3, 6, 6}, 0, 1, 4)});
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_LT(r->forward_error, 4e-3);
    EXPECT_LT(r->gradient_error, 4e-3);
  }
}

TEST(Conv2DTest, GradientsInheritPartialsTypeAndFormat) {
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat16, {2, 3, 6, 6});
  Output w = Placeholder(s, DType::kFloat16, {3, 3, 3, 4});
  Output y = Conv2D(s, x, w, {1, 1}, "SAME", ConvOptions{"NCHW", "half"});
  std::vector<Output> grads;
  ASSERT_TRUE(AddGradients(s, {y}, {x, w}, {}, &grads).ok());
  ASSERT_EQ(grads[0].node->op(), "Conv2DBackpropInput");
  ASSERT_EQ(grads[1].node->op(), "Conv2DBackpropFilter");
  for (const Output& g : grads) {
    EXPECT_EQ(g.node->attr<std::string>("partials_type"), "half");
    EXPECT_EQ(g.node->attr<std::string>("data_format"), "NCHW");
    EXPECT_EQ(g.dtype(), DType::kFloat16);
  }
  // Second order: the backprops' own gradients pass it on too.
  std::vector<Output> second;
  ASSERT_TRUE(AddGradients(s, {grads[1]}, {x}, {}, &second).ok());
  EXPECT_EQ(second[0].node->attr<std::string>("partials_type"), "half");
}

TEST(Conv2DTest, BadPartialsTypeAndMixedDTypesAreErrors) {
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat16, {1, 4, 4, 1});
  Output w = Placeholder(s, DType::kFloat16, {2, 2, 1, 1});
  Conv2D(s.WithOpName("c"), x, w, {1, 1}, "VALID", ConvOptions{"NHWC", "fp8"});
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find(
                "Conv2D 'c': partials_type must be \"half\" or \"float\", "
                "got \"fp8\""),
            std::string::npos)
      << s.status();
  Scope s2 = Scope::NewRootScope();
  Conv2D(s2.WithOpName("m"), Placeholder(s2, DType::kFloat16, {1, 4, 4, 1}),
         Placeholder(s2, DType::kFloat32, {2, 2, 1, 1}), {1, 1}, "VALID");
  EXPECT_NE(s2.status().message().find(
                "Conv2D 'm': input 'input' is float16 but input 'filter' is "
                "float32"),
            std::string::npos)
      << s2.status();
  Scope s3 = Scope::NewRootScope();
  Conv2DBackpropFilter(
      s3.WithOpName("f"), Placeholder(s3, DType::kFloat16, {1, 4, 4, 1}),
      Placeholder(s3, DType::kFloat16, {2, 2, 1, 1}),
      Placeholder(s3, DType::kFloat32, {1, 3, 3, 1}), {1, 1}, "VALID");
  EXPECT_NE(s3.status().message().find(
                "Conv2DBackpropFilter 'f': input 'input' is float16 but input "
                "'dy' is float32"),
            std::string::npos)
      << s3.status();
}

}  // namespace
}  // namespace ipuflow::ops
