#include "ops/array/split.h"

#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "ops/array/concat.h"
#include "ops/array/const.h"

namespace ipuflow::ops {
namespace {

using ::ipuflow::testing::MaxGradientError;
using ::ipuflow::testing::RandomTensor;
using ::ipuflow::testing::RunGraph;
using ::ipuflow::testing::TensorNear;

TEST(SplitTest, AlongColumns) {
  Scope s = Scope::NewRootScope();
  Output x = Const<float>(s, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {2, 6});
  std::vector<Output> y = Split(s, x, 3, -1);
  ASSERT_EQ(y.size(), 3u);
  EXPECT_EQ(y[0].shape(), TensorShape({2, 2}));
  auto out = RunGraph(s, {}, y);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorNear((*out)[0], {1, 2, 7, 8}, {2, 2}));
  EXPECT_TRUE(TensorNear((*out)[1], {3, 4, 9, 10}, {2, 2}));
  EXPECT_TRUE(TensorNear((*out)[2], {5, 6, 11, 12}, {2, 2}));
}

TEST(SplitTest, AlongRowsIntegers) {
  Scope s = Scope::NewRootScope();
  std::vector<Output> y =
      Split(s, Const<int32_t>(s, {1, 2, 3, 4, 5, 6}, {3, 2}), 3);
  auto out = RunGraph(s, {}, y);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorNear((*out)[0], {1, 2}, {1, 2}));
  EXPECT_TRUE(TensorNear((*out)[2], {5, 6}, {1, 2}));
}

TEST(SplitTest, NotDivisibleNamesBothNumbers) {
  Scope s = Scope::NewRootScope();
  std::vector<Output> y =
      Split(s.WithOpName("sp"), Const<float>(s, {1, 2, 3, 4, 5}, {1, 5}), 3, 1);
  EXPECT_EQ(y.size(), 3u);
  EXPECT_FALSE(y[0].valid());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find(
                "Split 'sp': dimension 1 of input 'x' (shape [1,5]) has size "
                "5, which is not divisible by num_split 3"),
            std::string::npos)
      << s.status();
}

TEST(SplitTest, BadNumSplitAndAxis) {
  Scope s1 = Scope::NewRootScope();
  Split(s1.WithOpName("sp"), Const<float>(s1, {1, 2}, {2}), 0);
  EXPECT_NE(s1.status().message().find("Split 'sp': num_split is 0"),
            std::string::npos)
      << s1.status();
  Scope s2 = Scope::NewRootScope();
  Split(s2.WithOpName("sp"), Const<float>(s2, {1, 2}, {2}), 2, 1);
  EXPECT_NE(s2.status().message().find("Split 'sp': axis 1 is out of range"),
            std::string::npos)
      << s2.status();
}

TEST(SplitTest, UnknownDimensionCheckedAtRunTime) {
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, {-1, 2});
  std::vector<Output> y = Split(s.WithOpName("sp"), x, 2);
  EXPECT_EQ(y[1].shape().DebugString(), "[?,2]");
  auto ok = RunGraph(s, {{x, RandomTensor({4, 2}, 0, 1, 1)}}, y);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ((*ok)[1].shape(), TensorShape({2, 2}));
  auto bad = RunGraph(s, {{x, RandomTensor({3, 2}, 0, 1, 1)}}, y);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("Split 'sp': dimension 0 of input 'x' "
                                        "(shape [3,2]) has size 3"),
            std::string::npos)
      << bad.status();
}

TEST(SplitTest, GradientOfOnePieceUsesZerosForTheOthers) {
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, {2, 6, 2});
  std::vector<Output> y = Split(s, x, 3, 1);
  auto err =
      MaxGradientError(s, {x}, {RandomTensor({2, 6, 2}, -1, 1, 1)}, y[1]);
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LT(*err, 1e-3);
}

TEST(SplitTest, GradientOfAllPieces) {
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, {4, 3});
  std::vector<Output> y = Split(s, x, 2, 0);
  Output z = Concat(s, {y[1], y[0], y[1]}, 1);
  auto err = MaxGradientError(s, {x}, {RandomTensor({4, 3}, -1, 1, 1)}, z);
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LT(*err, 1e-3);
}

}  // namespace
}  // namespace ipuflow::ops
