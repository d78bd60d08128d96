#include "ops/nn/bias_add.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/half.h"
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

TEST(BiasAddTest, NhwcAndNchw) {
  Scope s = Scope::NewRootScope();
  Output a = BiasAdd(s, Const<float>(s, {1, 2, 3, 4, 5, 6}, {2, 3}),
                     Const<float>(s, {10, 20, 30}, {3}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, a), {11, 22, 33, 14, 25, 36}, {2, 3}));
  Output b = BiasAdd(s, Const<float>(s, {1, 2, 3, 4, 5, 6, 7, 8}, {1, 2, 2, 2}),
                     Const<float>(s, {10, 20}, {2}), "NCHW");
  EXPECT_TRUE(TensorNear(RunOne(s, {}, b), {11, 12, 13, 14, 25, 26, 27, 28},
                         {1, 2, 2, 2}));
}

TEST(BiasAddTest, Float16) {
  Scope s = Scope::NewRootScope();
  Output y = BiasAdd(
      s, Const(s, Tensor::FromVector<half>({half(1.f), half(2.f)}, {1, 2})),
      Const(s, Tensor::FromVector<half>({half(0.5f), half(-1.f)})));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, y), {1.5, 1}, {1, 2}));
}

// NHWC rows are processed in blocks of about 256 values against a tiled
// bias: check channel counts that divide 256, do not, and exceed it, with
// row counts that leave partial blocks, and enough rows for several shards.
TEST(BiasAddTest, BlocksOfRowsMatchDirectSums) {
  for (int64_t c : {1, 3, 10, 64, 256, 300}) {
    for (int64_t rows : {1, 7, 26, 3000}) {
      SCOPED_TRACE(absl::StrCat(rows, " rows of ", c, " channels"));
      const Tensor xv = RandomTensor({rows, c}, -1, 1, 1);
      const Tensor bv = RandomTensor({c}, -1, 1, 2);
      Tensor y(DType::kFloat32, {rows, c});
      std::vector<double> db(c, 0.0);
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t ch = 0; ch < c; ++ch) {
          const float x = xv.data<float>()[r * c + ch];
          y.data<float>()[r * c + ch] = x + bv.data<float>()[ch];
          db[ch] += x;
        }
      }
      Tensor dbv(DType::kFloat32, {c});
      for (int64_t ch = 0; ch < c; ++ch) dbv.data<float>()[ch] = db[ch];
      Scope s = Scope::NewRootScope();
      Output x = Const(s, xv);
      EXPECT_TRUE(TensorNear(RunOne(s, {}, BiasAdd(s, x, Const(s, bv))), y));
      EXPECT_TRUE(
          TensorNear(RunOne(s, {}, BiasAddGrad(s, x)), dbv, 1e-4, 1e-5));
    }
  }
}

TEST(BiasAddTest, Float16BlocksOfRows) {
  // 100 rows of 10 channels of 0.25 and a bias of 1: every sum is exact.
  Scope s = Scope::NewRootScope();
  Output x = Const(s, Tensor::Filled(DType::kFloat16, {100, 10}, 0.25));
  Output b = Const(s, Tensor::Filled(DType::kFloat16, {10}, 1.0));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, BiasAdd(s, x, b)),
                         std::vector<float>(1000, 1.25f), {100, 10}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, BiasAddGrad(s, x)),
                         std::vector<float>(10, 25.0f), {10}));
}

TEST(BiasAddTest, Errors) {
  Scope s = Scope::NewRootScope();
  BiasAdd(s.WithOpName("b"), Placeholder(s, DType::kFloat32, {8, 3, 4, 4}),
          Placeholder(s, DType::kFloat32, {4}), "NCHW");
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find(
                "BiasAdd 'b': input 'bias' has shape [4] but input 'value' of "
                "shape [8,3,4,4] has 3 channels (dimension 1 for NCHW)"),
            std::string::npos)
      << s.status();

  Scope s2 = Scope::NewRootScope();
  BiasAdd(s2.WithOpName("b"), Placeholder(s2, DType::kFloat32, {3}),
          Placeholder(s2, DType::kFloat32, {3}));
  EXPECT_NE(
      s2.status().message().find(
          "BiasAdd 'b': input 'value' must have rank >= 2, got shape [3]"),
      std::string::npos)
      << s2.status();

  Scope s3 = Scope::NewRootScope();
  BiasAdd(s3.WithOpName("b"), Placeholder(s3, DType::kFloat32, {2, 3}),
          Placeholder(s3, DType::kFloat32, {3}), "CHWN");
  EXPECT_NE(s3.status().message().find("got \"CHWN\""), std::string::npos)
      << s3.status();
}

TEST(BiasAddTest, RunTimeChannelMismatch) {
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, {-1, -1});
  Output y = BiasAdd(s.WithOpName("b"), x, Const<float>(s, {1, 2}, {2}));
  auto out = ::ipuflow::testing::RunGraph(
      s, {{x, RandomTensor({2, 3}, 0, 1, 1)}}, {y});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find(
                "BiasAdd 'b': input 'bias' has shape [2] but input 'value' of "
                "shape [2,3] has 3 channels"),
            std::string::npos)
      << out.status();
}

TEST(BiasAddTest, Gradients) {
  for (const std::string format : {"NHWC", "NCHW"}) {
    Scope s = Scope::NewRootScope();
    const TensorShape shape =
        format == "NHWC" ? TensorShape({2, 2, 3}) : TensorShape({2, 3, 2});
    Output x = Placeholder(s, DType::kFloat32, shape);
    Output b = Placeholder(s, DType::kFloat32, {3});
    auto err = MaxGradientError(
        s, {x, b}, {RandomTensor(shape, -1, 1, 1), RandomTensor({3}, -1, 1, 2)},
        BiasAdd(s, x, b, format));
    ASSERT_TRUE(err.ok()) << err.status();
    EXPECT_LT(*err, 1e-3) << format;
  }
}

TEST(BiasAddGradTest, ForwardAndGradient) {
  Scope s = Scope::NewRootScope();
  Output a = BiasAddGrad(s, Const<float>(s, {1, 2, 3, 4, 5, 6}, {2, 3}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, a), {5, 7, 9}, {3}));
  Output b = BiasAddGrad(
      s, Const<float>(s, {1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2}), "NCHW");
  EXPECT_TRUE(
      TensorNear(RunOne(s, {}, b), {1 + 2 + 5 + 6, 3 + 4 + 7 + 8}, {2}));
  Output dy = Placeholder(s, DType::kFloat32, {2, 2, 3});
  auto err = MaxGradientError(s, {dy}, {RandomTensor({2, 2, 3}, -1, 1, 1)},
                              BiasAddGrad(s, dy, "NCHW"));
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LT(*err, 1e-3);
}

TEST(BiasAddTest, Float16KernelAndGradientsMatchFloat32) {
  absl::StatusOr<HalfCheck> c = CompareHalfToFloat(
      [](const Scope& s, const std::vector<Output>& x) {
        return BiasAdd(s, x[0], x[1]);
      },
      {RandomTensor({6, 5, 5, 10}, -1, 1, 1), RandomTensor({10}, -1, 1, 2)});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->dtype, DType::kFloat16);
  EXPECT_LT(c->forward_error, 2e-3);
  EXPECT_LT(c->gradient_error, 2e-3);
}

TEST(BiasAddTest, Float16NchwMatchesFloat32) {
  absl::StatusOr<HalfCheck> c = CompareHalfToFloat(
      [](const Scope& s, const std::vector<Output>& x) {
        return BiasAdd(s, x[0], x[1], "NCHW");
      },
      {RandomTensor({3, 4, 5, 5}, -1, 1, 3), RandomTensor({4}, -1, 1, 4)});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->dtype, DType::kFloat16);
  EXPECT_LT(c->forward_error, 2e-3);
  EXPECT_LT(c->gradient_error, 2e-3);
}

}  // namespace
}  // namespace ipuflow::ops
