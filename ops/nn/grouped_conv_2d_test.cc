#include "ops/nn/grouped_conv_2d.h"

#include <limits>
#include <vector>

#include "core/gradients.h"
#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "ops/array/concat.h"
#include "ops/array/const.h"
#include "ops/array/slice.h"
#include "ops/nn/conv2d.h"
#include "ops/testing/half_check.h"

namespace ipuflow::ops {
namespace {

using ::ipuflow::testing::CompareHalfToFloat;
using ::ipuflow::testing::HalfCheck;
using ::ipuflow::testing::MaxGradientError;
using ::ipuflow::testing::RandomTensor;
using ::ipuflow::testing::RunGraph;
using ::ipuflow::testing::RunOne;
using ::ipuflow::testing::TensorNear;

// Forward and both gradients of `a` and `b` (built from the same x, w).
void ExpectSameConv(const Scope& s, Output x, Output w, Output a, Output b,
                    const char* what) {
  std::vector<Output> ga, gb;
  ASSERT_TRUE(AddGradients(s, {a}, {x, w}, {}, &ga).ok()) << what;
  ASSERT_TRUE(AddGradients(s, {b}, {x, w}, {}, &gb).ok()) << what;
  auto out = RunGraph(s, {}, {a, b, ga[0], gb[0], ga[1], gb[1]});
  ASSERT_TRUE(out.ok()) << what << ": " << out.status();
  for (int i = 0; i < 6; i += 2) {
    EXPECT_TRUE(TensorNear((*out)[i], (*out)[i + 1], 1e-4, 1e-4))
        << what << " output " << i;
  }
}

TEST(GroupedConv2DTest, OneGroupEqualsConv2D) {
  for (const char* padding : {"SAME", "VALID"}) {
    Scope s = Scope::NewRootScope();
    Output x = Const(s, RandomTensor({2, 7, 6, 3}, -1, 1, 1));
    Output w = Const(s, RandomTensor({3, 2, 3, 4}, -1, 1, 2));
    ExpectSameConv(
        s, x, w,
        GroupedConv2D(s, x, w, {.strides = {2, 1}, .padding = padding}),
        Conv2D(s, x, w, {2, 1}, padding), padding);
  }
}

// A dilated filter is the filter with d - 1 zeros between its taps.
TEST(GroupedConv2DTest, DilationEqualsAZeroInsertedFilter) {
  const Tensor wv = RandomTensor({2, 3, 2, 3}, -1, 1, 3);
  // Dilations (2, 3): [2, 3] taps -> a [3, 7] filter.
  Tensor big(DType::kFloat32, TensorShape({3, 7, 2, 3}));
  std::fill_n(big.data<float>(), big.NumElements(), 0.0f);
  for (int a = 0; a < 2; ++a) {
    for (int b = 0; b < 3; ++b) {
      std::copy_n(wv.data<float>() + (a * 3 + b) * 6, 6,
                  big.data<float>() + (a * 2 * 7 + b * 3) * 6);
    }
  }
  for (const char* padding : {"SAME", "VALID"}) {
    Scope s = Scope::NewRootScope();
    Output x = Const(s, RandomTensor({2, 8, 9, 2}, -1, 1, 4));
    Output w = Const(s, wv);
    Output y =
        GroupedConv2D(s, x, w, {.dilations = {2, 3}, .padding = padding});
    Output ref = Conv2D(s, x, Const(s, big), {1, 1}, padding);
    auto out = RunGraph(s, {}, {y, ref});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_TRUE(TensorNear((*out)[0], (*out)[1], 1e-5, 1e-5)) << padding;
  }
}

// Groups are independent convolutions of channel slices, concatenated.
TEST(GroupedConv2DTest, GroupsEqualSlicedConvolutions) {
  Scope s = Scope::NewRootScope();
  Output x = Const(s, RandomTensor({2, 5, 5, 6}, -1, 1, 5));
  Output w = Const(s, RandomTensor({3, 3, 2, 9}, -1, 1, 6));  // 3 groups.
  std::vector<Output> parts;
  for (int64_t g = 0; g < 3; ++g) {
    Output xg = Slice(s, x, {0, 0, 0, 2 * g}, {2, 5, 5, 2});
    Output wg = Slice(s, w, {0, 0, 0, 3 * g}, {3, 3, 2, 3});
    parts.push_back(Conv2D(s, xg, wg, {1, 1}, "SAME"));
  }
  ExpectSameConv(s, x, w,
                 GroupedConv2D(s, x, w, {.padding = "SAME", .groups = 3}),
                 Concat(s, parts, 3), "groups");
}

TEST(GroupedConv2DTest, GradientsMatchFiniteDifferences) {
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, {1, 6, 5, 4});
  Output w = Placeholder(s, DType::kFloat32, {2, 2, 2, 4});
  auto err = MaxGradientError(s, {x, w},
                              {RandomTensor({1, 6, 5, 4}, -1, 1, 7),
                               RandomTensor({2, 2, 2, 4}, -1, 1, 8)},
                              GroupedConv2D(s, x, w,
                                            {.strides = {2, 1},
                                             .dilations = {2, 2},
                                             .padding = "SAME",
                                             .groups = 2}));
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LT(*err, 2e-3);
}

TEST(GroupedConv2DTest, DepthwiseByHand) {
  Scope s = Scope::NewRootScope();
  // Two channels, 1x2 filter, multiplier 1: channel 0 sums its pair,
  // channel 1 takes the difference.
  Output x = Const<float>(s, {1, 10, 2, 20, 3, 30}, {1, 1, 3, 2});
  Output w = Const<float>(s, {1, -1, 1, 1}, {1, 2, 2, 1});
  EXPECT_TRUE(TensorNear(RunOne(s, {}, DepthwiseConv2D(s, x, w)),
                         {3, 10, 5, 10}, {1, 1, 2, 2}));
}

TEST(GroupedConv2DTest, Conv1DEqualsConv2DOnHeightOne) {
  Scope s = Scope::NewRootScope();
  const Tensor xv = RandomTensor({2, 9, 3}, -1, 1, 9);
  const Tensor wv = RandomTensor({3, 3, 5}, -1, 1, 10);
  Output y = Conv1D(s, Const(s, xv), Const(s, wv),
                    {.strides = {2}, .dilations = {1}, .padding = "SAME"});
  EXPECT_EQ(y.shape(), TensorShape({2, 5, 5}));
  Output ref = Conv2D(s, Const(s, *xv.Reshaped({2, 1, 9, 3})),
                      Const(s, *wv.Reshaped({1, 3, 3, 5})), {1, 2}, "SAME");
  auto out = RunGraph(s, {}, {y, ref});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(
      TensorNear((*out)[0], *(*out)[1].Reshaped({2, 5, 5}), 1e-5, 1e-5));
}

TEST(GroupedConv2DTest, ConvTransposeScattersTheFilter) {
  Scope s = Scope::NewRootScope();
  // One input pixel of 2 at (0, 0), stride 2, VALID: the 3x3 filter times 2
  // lands in the top-left corner of the 4x4 output.
  std::vector<float> xv(4, 0.0f);
  xv[0] = 2;
  Output x = Const<float>(s, xv, {1, 2, 2, 1});
  std::vector<float> wv(9);
  for (int i = 0; i < 9; ++i) wv[i] = i + 1;
  Output w = Const<float>(s, wv, {3, 3, 1, 1});
  Output y = ConvTranspose2D(s, x, w, {1, 5, 5, 1}, {2, 2}, "VALID");
  Tensor out = RunOne(s, {}, y);
  ASSERT_EQ(out.shape(), TensorShape({1, 5, 5, 1}));
  for (int r = 0; r < 3; ++r) {
    for (int c = 0; c < 3; ++c) {
      EXPECT_EQ(out.data<float>()[r * 5 + c], 2 * (r * 3 + c + 1));
    }
  }
  EXPECT_EQ(out.data<float>()[4], 0.0f);
}

TEST(GroupedConv2DTest, Float16AndErrors) {
  absl::StatusOr<HalfCheck> c = CompareHalfToFloat(
      [](const Scope& s, const std::vector<Output>& v) {
        return GroupedConv2D(
            s, v[0], v[1],
            {.dilations = {2, 1}, .padding = "SAME", .groups = 2});
      },
      {RandomTensor({1, 5, 5, 4}, -1, 1, 1),
       RandomTensor({3, 3, 2, 4}, -1, 1, 2)});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->dtype, DType::kFloat16);
  EXPECT_LT(c->forward_error, 2e-3);
  EXPECT_LT(c->gradient_error, 2e-3);
  Scope b = Scope::NewRootScope();
  GroupedConv2D(b.WithOpName("conv"),
                Const(b, RandomTensor({1, 5, 5, 4}, 0, 1, 1)),
                Const(b, RandomTensor({3, 3, 2, 4}, 0, 1, 1)), {.groups = 3});
  EXPECT_NE(b.status().message().find("do not fit 3 groups"), std::string::npos)
      << b.status();
  Scope d = Scope::NewRootScope();
  GroupedConv2D(d, Const(d, RandomTensor({1, 5, 5, 4}, 0, 1, 1)),
                Const(d, RandomTensor({3, 3, 4, 4}, 0, 1, 1)),
                {.dilations = {0, 1}});
  EXPECT_NE(d.status().message().find("dilations must be two integers >= 1"),
            std::string::npos)
      << d.status();
}

// Issue 30: what TensorFlow and PyTorch refuse, or what oneDNN would refuse
// only at run time (Internal), is InvalidArgument when the graph is built.
TEST(GroupedConv2DTest, RefusesWindowsLargerThanTheInputAndHugeAttributes) {
  struct Bad {
    GroupedConvOptions options;
    std::vector<int64_t> filter;
    const char* message;
  };
  const Bad bad[] = {
      // (3 - 1) * 3 + 1 = 7 > 5: TensorFlow and PyTorch refuse it; this
      // returned an empty [1, 0, 0, 4] tensor.
      {{.dilations = {3, 3}},
       {3, 3, 4, 4},
       "VALID padding: the dilated filter height 7 ((3 - 1) * dilation 3 + "
       "1) is larger than the input height 5"},
      {{},
       {6, 1, 4, 4},
       "the dilated filter height 6 ((6 - 1) * dilation 1 + 1) is larger "
       "than the input height 5"},
      // oneDNN refused these only at run time (Internal).
      {{.dilations = {1, int64_t{1} << 62}, .padding = "SAME"},
       {3, 3, 4, 4},
       "dilations must be two integers >= 1 and at most 2147483647"},
      {{.strides = {1, std::numeric_limits<int64_t>::max()}, .padding = "SAME"},
       {3, 3, 4, 4},
       "strides must be two integers >= 1 and at most 2147483647"},
      {{.dilations = {2147483647, 1}, .padding = "SAME"},
       {3, 3, 4, 4},
       "the dilated filter height (3 - 1) * dilation 2147483647 + 1 is "
       "larger than 2147483647"},
      // (2^40 - 1) * 2^30 wraps int64: checked arithmetic.
      {{.dilations = {1, int64_t{1} << 30}, .padding = "SAME"},
       {1, int64_t{1} << 40, 4, 4},
       "the dilated filter width (1099511627776 - 1) * dilation 1073741824 "
       "+ 1 is larger than 2147483647"},
  };
  for (const Bad& b : bad) {
    Scope s = Scope::NewRootScope();
    GroupedConv2D(
        s.WithOpName("g"), Const(s, RandomTensor({1, 5, 5, 4}, 0, 1, 1)),
        Placeholder(s, DType::kFloat32, TensorShape(b.filter)), b.options);
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument)
        << s.status();
    EXPECT_NE(s.status().message().find("GroupedConv2D 'g'"), std::string::npos)
        << s.status();
    EXPECT_NE(s.status().message().find(b.message), std::string::npos)
        << s.status();
  }
  // A window that fits is still fine: (2 - 1) * 4 + 1 = 5.
  Scope s = Scope::NewRootScope();
  Output y = GroupedConv2D(s, Const(s, RandomTensor({1, 5, 5, 4}, 0, 1, 1)),
                           Const(s, RandomTensor({2, 2, 4, 4}, 0, 1, 2)),
                           {.dilations = {4, 4}});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(y.shape(), TensorShape({1, 1, 1, 4}));
}

}  // namespace
}  // namespace ipuflow::ops
