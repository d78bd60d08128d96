#include "ops/array/slice.h"

#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"

namespace ipuflow::ops {
namespace {

using ::ipuflow::testing::MaxGradientError;
using ::ipuflow::testing::RandomTensor;
using ::ipuflow::testing::RunOne;
using ::ipuflow::testing::TensorNear;

Output Iota34(const Scope& s) {
  return Const<float>(s, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {3, 4});
}

TEST(SliceTest, BoxWithToTheEnd) {
  Scope s = Scope::NewRootScope();
  Output y = Slice(s, Iota34(s), {1, 1}, {2, -1});
  EXPECT_EQ(y.shape(), TensorShape({2, 3}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, y), {5, 6, 7, 9, 10, 11}, {2, 3}));
}

TEST(SliceTest, ThreeDimsAndOtherDTypes) {
  Scope s = Scope::NewRootScope();
  // x[i][j][k] = 100i + 10j + k, x:[2,3,2]; y = x[1:2, 0:2, 1:2].
  Output x = Const<int64_t>(
      s, {0, 1, 10, 11, 20, 21, 100, 101, 110, 111, 120, 121}, {2, 3, 2});
  EXPECT_TRUE(TensorNear(RunOne(s, {}, Slice(s, x, {1, 0, 1}, {1, 2, 1})),
                         {101, 111}, {1, 2, 1}));
  Output b =
      Const(s, Tensor::FromVector<bool>({true, false, false, true}, {4}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, Slice(s, b, {1}, {3})), {0, 0, 1}, {3}));
  Output h = Const(s, RandomTensor({4, 4}, -1, 1, 2, DType::kFloat16));
  EXPECT_EQ(RunOne(s, {}, Slice(s, h, {0, 2}, {4, 0})).shape(),
            TensorShape({4, 0}));
}

TEST(SliceTest, UnknownDimension) {
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, {-1, 4});
  Output y = Slice(s, x, {1, 1}, {-1, 2});
  EXPECT_EQ(y.shape().DebugString(), "[?,2]");
  Tensor xv = Tensor::FromVector<float>({0, 1, 2, 3, 4, 5, 6, 7}, {2, 4});
  EXPECT_TRUE(TensorNear(RunOne(s, {{x, xv}}, y), {5, 6}, {1, 2}));
}

TEST(SliceTest, BoxPastTheEndNamesAttrsAndShape) {
  Scope s = Scope::NewRootScope();
  Slice(s.WithOpName("sl"), Iota34(s), {1, 3}, {2, 2});
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string msg(s.status().message());
  EXPECT_NE(msg.find("Slice 'sl'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("begin [1,3] and size [2,2]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("input 'x' (shape [3,4]) in dimension 1"),
            std::string::npos)
      << msg;
}

TEST(SliceTest, WrongLengthAndNegativeBegin) {
  for (const auto& [begin, size] :
       std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>>{
           {{0}, {1}}, {{-1, 0}, {1, 1}}, {{0, 0}, {1, -2}}}) {
    Scope s = Scope::NewRootScope();
    Slice(s.WithOpName("sl"), Iota34(s), begin, size);
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(s.status().message().find("Slice 'sl': begin"), std::string::npos)
        << s.status();
  }
}

TEST(SliceTest, RunTimeBoxPastTheEnd) {
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, {-1});
  Output y = Slice(s.WithOpName("sl"), x, {2}, {3});
  auto out =
      ::ipuflow::testing::RunGraph(s, {{x, RandomTensor({4}, 0, 1, 1)}}, {y});
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find("Slice 'sl'"), std::string::npos)
      << out.status();
  EXPECT_NE(out.status().message().find("(shape [4])"), std::string::npos)
      << out.status();
}

TEST(SliceTest, GradientViaPad) {
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, {3, 4, 2});
  Output y = Slice(s, x, {1, 0, 1}, {2, 3, -1});
  auto err = MaxGradientError(s, {x}, {RandomTensor({3, 4, 2}, -1, 1, 1)}, y);
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LT(*err, 1e-3);
}

TEST(SliceTest, GradientWithUnknownDimension) {
  // Dimension 0 is unknown and not sliced to its end: the gradient needs x's
  // run-time shape (StridedSliceGrad).
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, {-1, 4});
  Output y = Slice(s, x, {1, 1}, {1, 2});
  auto err = MaxGradientError(s, {x}, {RandomTensor({3, 4}, -1, 1, 1)}, y);
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LT(*err, 1e-3);
}

}  // namespace
}  // namespace ipuflow::ops
