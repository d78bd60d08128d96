#include "ops/array/concat.h"

#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"

namespace ipuflow::ops {
namespace {

using ::ipuflow::testing::MaxGradientError;
using ::ipuflow::testing::RandomTensor;
using ::ipuflow::testing::RunOne;
using ::ipuflow::testing::TensorNear;

TEST(ConcatTest, AlongRowsAndColumns) {
  Scope s = Scope::NewRootScope();
  Output a = Const<float>(s, {1, 2, 3, 4}, {2, 2});
  Output b = Const<float>(s, {5, 6}, {2, 1});
  Output cols = Concat(s, {a, b}, 1);
  EXPECT_EQ(cols.shape(), TensorShape({2, 3}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, cols), {1, 2, 5, 3, 4, 6}, {2, 3}));
  Output rows = Concat(s, {a, Const<float>(s, {7, 8}, {1, 2}), a}, -2);
  EXPECT_TRUE(
      TensorNear(RunOne(s, {}, rows), {1, 2, 3, 4, 7, 8, 1, 2, 3, 4}, {5, 2}));
}

TEST(ConcatTest, OtherDTypesAndEmptyPieces) {
  Scope s = Scope::NewRootScope();
  Output i = Concat(s,
                    {Const<int64_t>(s, {1, 2}, {2}), Const<int64_t>(s, {}, {0}),
                     Const<int64_t>(s, {3}, {1})},
                    0);
  EXPECT_TRUE(TensorNear(RunOne(s, {}, i), {1, 2, 3}, {3}));
  Output b = Concat(s,
                    {Const(s, Tensor::FromVector<bool>({true}, {1, 1})),
                     Const(s, Tensor::FromVector<bool>({false}, {1, 1}))},
                    1);
  EXPECT_TRUE(TensorNear(RunOne(s, {}, b), {1, 0}, {1, 2}));
}

TEST(ConcatTest, UnknownDimensions) {
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, {-1, 2});
  Output y = Placeholder(s, DType::kFloat32, {-1, -1});
  EXPECT_EQ(
      Concat(s, {x, Const<float>(s, {9, 9}, {1, 2})}, 0).shape().DebugString(),
      "[?,2]");
  Output z = Concat(s, {x, y}, 1);
  EXPECT_EQ(z.shape().DebugString(), "[?,?]");
  Tensor xv = Tensor::FromVector<float>({1, 2}, {1, 2});
  Tensor yv = Tensor::FromVector<float>({3}, {1, 1});
  EXPECT_TRUE(TensorNear(RunOne(s, {{x, xv}, {y, yv}}, z), {1, 2, 3}, {1, 3}));
}

TEST(ConcatTest, MismatchNamesInputIndexAndShapes) {
  Scope s = Scope::NewRootScope();
  Concat(s.WithOpName("c"),
         {Const<float>(s, {1, 2, 3, 4, 5, 6}, {2, 3}),
          Const<float>(s, {1, 2, 3, 4, 5, 6}, {2, 3}),
          Const<float>(s, {1, 2, 3, 4, 5, 6}, {3, 2})},
         1);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find(
                "Concat 'c': input 'values[2]' has shape [3,2] but input "
                "'values[0]' has shape [2,3]; all dimensions but the concat "
                "axis 1 must match"),
            std::string::npos)
      << s.status();
}

TEST(ConcatTest, RankDTypeAndAxisErrors) {
  Scope s1 = Scope::NewRootScope();
  Concat(s1.WithOpName("c"),
         {Const<float>(s1, {1, 2}, {2}), Const<float>(s1, {1, 2}, {1, 2})}, 0);
  EXPECT_NE(s1.status().message().find("input 'values[1]' has shape [1,2] but "
                                       "input 'values[0]' has shape [2]; "
                                       "ranks must match"),
            std::string::npos)
      << s1.status();
  Scope s2 = Scope::NewRootScope();
  Concat(s2.WithOpName("c"),
         {Const<float>(s2, {1}, {1}), Const<int32_t>(s2, {1}, {1})}, 0);
  EXPECT_NE(s2.status().message().find("input 'values[1]' is int32"),
            std::string::npos)
      << s2.status();
  Scope s3 = Scope::NewRootScope();
  Concat(s3.WithOpName("c"), {Const<float>(s3, {1}, {1})}, 1);
  EXPECT_EQ(s3.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s3.status().message().find("Concat 'c': axis 1 is out of range"),
            std::string::npos)
      << s3.status();
}

TEST(ConcatTest, RunTimeMismatch) {
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, {-1, 2});
  Output y = Placeholder(s, DType::kFloat32, {-1, 2});
  Output z = Concat(s.WithOpName("c"), {x, y}, 1);
  auto out = ::ipuflow::testing::RunGraph(
      s,
      {{x, RandomTensor({2, 2}, 0, 1, 1)}, {y, RandomTensor({3, 2}, 0, 1, 2)}},
      {z});
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find(
                "Concat 'c': input 'values[1]' has shape [3,2]"),
            std::string::npos)
      << out.status();
}

TEST(ConcatTest, GradientViaSlices) {
  Scope s = Scope::NewRootScope();
  Output a = Placeholder(s, DType::kFloat32, {2, 1, 3});
  Output b = Placeholder(s, DType::kFloat32, {2, 2, 3});
  Output y = Concat(s, {a, b, a}, 1);
  auto err = MaxGradientError(
      s, {a, b},
      {RandomTensor({2, 1, 3}, -1, 1, 1), RandomTensor({2, 2, 3}, -1, 1, 2)},
      y);
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LT(*err, 1e-3);
}

TEST(ConcatTest, GradientWithUnknownSizesViaConcatGrad) {
  Scope s = Scope::NewRootScope();
  Output a = Placeholder(s, DType::kFloat32, {-1, 3});
  Output b = Placeholder(s, DType::kFloat32, {-1, 3});
  Output y = Concat(s, {a, b}, 0);
  auto err = MaxGradientError(
      s, {a, b},
      {RandomTensor({1, 3}, -1, 1, 1), RandomTensor({3, 3}, -1, 1, 2)}, y);
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LT(*err, 1e-3);
}

TEST(ConcatTest, ConcatGradSplitsLikeValues) {
  Scope s = Scope::NewRootScope();
  Output dy = Const<float>(s, {1, 2, 3, 4, 5, 6}, {2, 3});
  Output a = Placeholder(s, DType::kFloat32, {2, -1});
  Output b = Placeholder(s, DType::kFloat32, {-1, 2});
  std::vector<Output> parts = ConcatGrad(s, dy, {a, b}, 1);
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[1].shape().DebugString(), "[2,2]");
  FeedList feeds = {{a, RandomTensor({2, 1}, 0, 1, 1)},
                    {b, RandomTensor({2, 2}, 0, 1, 1)}};
  EXPECT_TRUE(TensorNear(RunOne(s, feeds, parts[0]), {1, 4}, {2, 1}));
  EXPECT_TRUE(TensorNear(RunOne(s, feeds, parts[1]), {2, 3, 5, 6}, {2, 2}));
}

TEST(ConcatTest, ConcatGradGradient) {
  Scope s = Scope::NewRootScope();
  Output dy = Placeholder(s, DType::kFloat32, {4, 2});
  Output a = Const(s, RandomTensor({1, 2}, 0, 1, 1));
  Output b = Const(s, RandomTensor({3, 2}, 0, 1, 1));
  std::vector<Output> parts = ConcatGrad(s, dy, {a, b}, 0);
  // Only parts[1] is used: parts[0]'s gradient is zeros.
  auto err =
      MaxGradientError(s, {dy}, {RandomTensor({4, 2}, -1, 1, 3)}, parts[1]);
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LT(*err, 1e-3);
}

}  // namespace
}  // namespace ipuflow::ops
