#include "ops/array/gather.h"

#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"

namespace ipuflow::ops {
namespace {

using ::ipuflow::testing::MaxGradientError;
using ::ipuflow::testing::RandomTensor;
using ::ipuflow::testing::RunGraph;
using ::ipuflow::testing::RunOne;
using ::ipuflow::testing::TensorNear;

TEST(GatherTest, RowsWithMatrixOfIndices) {
  Scope s = Scope::NewRootScope();
  Output params = Const<float>(s, {1, 2, 3, 4, 5, 6}, {3, 2});
  Output y = Gather(s, params, Const<int32_t>(s, {2, 0, 1, 1}, {2, 2}));
  EXPECT_EQ(y.shape(), TensorShape({2, 2, 2}));
  EXPECT_TRUE(
      TensorNear(RunOne(s, {}, y), {5, 6, 1, 2, 3, 4, 3, 4}, {2, 2, 2}));
}

TEST(GatherTest, ColumnsWithInt64IndicesAndIntParams) {
  Scope s = Scope::NewRootScope();
  Output params = Const<int32_t>(s, {1, 2, 3, 4, 5, 6}, {2, 3});
  Output y = Gather(s, params, Const<int64_t>(s, {2, 0}, {2}), 1);
  EXPECT_TRUE(TensorNear(RunOne(s, {}, y), {3, 1, 6, 4}, {2, 2}));
  Output scalar = Gather(s, params, Const(s, Tensor::Scalar<int64_t>(1)), -1);
  EXPECT_TRUE(TensorNear(RunOne(s, {}, scalar), {2, 5}, {2}));
}

TEST(GatherTest, UnknownDimensions) {
  Scope s = Scope::NewRootScope();
  Output params = Placeholder(s, DType::kFloat32, {-1, 2});
  Output idx = Placeholder(s, DType::kInt32, {-1});
  Output y = Gather(s, params, idx);
  EXPECT_EQ(y.shape().DebugString(), "[?,2]");
  Tensor pv = Tensor::FromVector<float>({1, 2, 3, 4}, {2, 2});
  Tensor iv = Tensor::FromVector<int32_t>({1, 1, 0});
  EXPECT_TRUE(TensorNear(RunOne(s, {{params, pv}, {idx, iv}}, y),
                         {3, 4, 3, 4, 1, 2}, {3, 2}));
}

TEST(GatherTest, OutOfRangeIndexAtRunTime) {
  Scope s = Scope::NewRootScope();
  Output params = Const<float>(s, {1, 2, 3}, {3});
  Output idx = Placeholder(s, DType::kInt32, {2, 2});
  Output y = Gather(s.WithOpName("g"), params, idx);
  auto out = RunGraph(
      s, {{idx, Tensor::FromVector<int32_t>({0, 1, 5, 2}, {2, 2})}}, {y});
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find(
                "Gather 'g': indices[1,0] = 5 is out of range [0, 3) for "
                "dimension 0 of input 'params' (shape [3])"),
            std::string::npos)
      << out.status();
  auto negative = RunGraph(
      s, {{idx, Tensor::FromVector<int32_t>({0, -1, 0, 0}, {2, 2})}}, {y});
  EXPECT_NE(negative.status().message().find("indices[0,1] = -1"),
            std::string::npos)
      << negative.status();
}

TEST(GatherTest, ConstantIndicesAreCheckedWhenBuilding) {
  Scope s = Scope::NewRootScope();
  Gather(s.WithOpName("g"), Const<float>(s, {1, 2, 3, 4}, {2, 2}),
         Const<int64_t>(s, {0, 2}, {2}), 1);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find(
                "Gather 'g': indices[1] = 2 is out of range [0, 2) for "
                "dimension 1 of input 'params'"),
            std::string::npos)
      << s.status();
}

TEST(GatherTest, FloatIndicesAndScalarParamsAreErrors) {
  Scope s1 = Scope::NewRootScope();
  Gather(s1.WithOpName("g"), Const<float>(s1, {1, 2}, {2}),
         Const<float>(s1, {0}, {1}));
  EXPECT_NE(
      s1.status().message().find(
          "Gather 'g': input 'indices' must be int32 or int64, got float32"),
      std::string::npos)
      << s1.status();
  Scope s2 = Scope::NewRootScope();
  Gather(s2.WithOpName("g"), Const(s2, 1.0f), Const<int32_t>(s2, {0}, {1}));
  EXPECT_NE(s2.status().message().find("input 'params' is a scalar"),
            std::string::npos)
      << s2.status();
}

TEST(GatherTest, GatherGradAccumulatesRepeatedIndices) {
  Scope s = Scope::NewRootScope();
  Output like = Placeholder(s, DType::kFloat32, {3, 2});
  Output dx = GatherGrad(s, Const<float>(s, {1, 2, 10, 20, 100, 200}, {3, 2}),
                         Const<int32_t>(s, {2, 0, 2}, {3}), like);
  EXPECT_TRUE(TensorNear(RunOne(s, {{like, RandomTensor({3, 2}, 0, 1, 1)}}, dx),
                         {10, 20, 0, 0, 101, 202}, {3, 2}));
}

TEST(GatherTest, GradientAxisZeroWithRepeats) {
  Scope s = Scope::NewRootScope();
  Output params = Placeholder(s, DType::kFloat32, {4, 3});
  Output y = Gather(s, params, Const<int32_t>(s, {3, 1, 3, 0, 3, 1}, {2, 3}));
  auto err = MaxGradientError(s, {params}, {RandomTensor({4, 3}, -1, 1, 1)}, y);
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LT(*err, 1e-3);
}

TEST(GatherTest, GradientInnerAxis) {
  Scope s = Scope::NewRootScope();
  Output params = Placeholder(s, DType::kFloat32, {2, 5, 3});
  Output y = Gather(s, params, Const<int64_t>(s, {4, 0, 4, 2}, {4}), 1);
  auto err =
      MaxGradientError(s, {params}, {RandomTensor({2, 5, 3}, -1, 1, 1)}, y);
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LT(*err, 1e-3);
}

TEST(GatherTest, GatherGradGradient) {
  Scope s = Scope::NewRootScope();
  Output dy = Placeholder(s, DType::kFloat32, {2, 3});
  Output dx = GatherGrad(s, dy, Const<int32_t>(s, {1, 1, 0}, {3}),
                         Const(s, RandomTensor({2, 2}, 0, 1, 1)), 1);
  auto err = MaxGradientError(s, {dy}, {RandomTensor({2, 3}, -1, 1, 1)}, dx);
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LT(*err, 1e-3);
}

}  // namespace
}  // namespace ipuflow::ops
