#include "ops/array/strided_slice.h"

#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"

namespace ipuflow::ops {
namespace {

using ::ipuflow::testing::MaxGradientError;
using ::ipuflow::testing::RandomTensor;
using ::ipuflow::testing::RunOne;
using ::ipuflow::testing::TensorNear;

StridedSliceOptions Masks(int64_t begin, int64_t end, int64_t shrink = 0) {
  StridedSliceOptions o;
  o.begin_mask = begin;
  o.end_mask = end;
  o.shrink_axis_mask = shrink;
  return o;
}

Tensor Iota(int64_t n, const TensorShape& shape) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(i);
  return Tensor::FromVector<float>(v, shape);
}

TEST(StridedSliceTest, OneDimensionTable) {
  // Expected values are Python's list(range(10))[b:e:s] (None where masked).
  struct Case {
    int64_t b, e, s, bm, em;
    std::vector<float> expected;
  };
  const std::vector<Case> cases = {
      {1, 8, 3, 0, 0, {1, 4, 7}},
      {-1, 0, -2, 0, 0, {9, 7, 5, 3, 1}},
      {0, 0, -1, 1, 1, {9, 8, 7, 6, 5, 4, 3, 2, 1, 0}},
      {2, 0, 1, 0, 1, {2, 3, 4, 5, 6, 7, 8, 9}},
      {-3, 0, 1, 0, 1, {7, 8, 9}},
      {-100, 100, 1, 0, 0, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}},
      {5, 2, 1, 0, 0, {}},
      {8, -100, -3, 0, 0, {8, 5, 2}},
      {0, -1, 1, 1, 0, {0, 1, 2, 3, 4, 5, 6, 7, 8}},
      {3, 7, -1, 0, 0, {}},
      {0, 4, 2, 0, 1, {0, 2, 4, 6, 8}},
  };
  for (const Case& c : cases) {
    Scope s = Scope::NewRootScope();
    Output y = StridedSlice(s, Const(s, Iota(10, {10})), {c.b}, {c.e}, {c.s},
                            Masks(c.bm, c.em));
    EXPECT_TRUE(TensorNear(RunOne(s, {}, y), c.expected,
                           {static_cast<int64_t>(c.expected.size())}))
        << c.b << ":" << c.e << ":" << c.s << " masks " << c.bm << c.em;
  }
}

TEST(StridedSliceTest, MasksShrinkAndReverse) {
  // y = x[1:, ::-1, 2] for x = iota([2,3,4]): x[1][j][2] = 12 + 4j + 2.
  Scope s = Scope::NewRootScope();
  Output y = StridedSlice(s, Const(s, Iota(24, {2, 3, 4})), {1, 0, 2},
                          {0, 0, 3}, {1, -1, 1}, Masks(0b010, 0b011, 0b100));
  EXPECT_EQ(y.shape(), TensorShape({1, 3}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, y), {22, 18, 14}, {1, 3}));
}

TEST(StridedSliceTest, ShrinkNegativeIndexToScalarAndIntegers) {
  Scope s = Scope::NewRootScope();
  Output x = Const<int32_t>(s, {5, 6, 7}, {3});
  Output y = StridedSlice(s, x, {-1}, {0}, {1}, Masks(0, 0, 1));
  EXPECT_EQ(y.shape(), TensorShape({}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, y), {7}, {}));
}

TEST(StridedSliceTest, TrailingDimensionsAreTakenWhole) {
  Scope s = Scope::NewRootScope();
  Output y = StridedSlice(s, Const(s, Iota(6, {2, 3})), {1}, {2}, {1});
  EXPECT_TRUE(TensorNear(RunOne(s, {}, y), {3, 4, 5}, {1, 3}));
}

TEST(StridedSliceTest, UnknownDimension) {
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, {-1, 3});
  Output y = StridedSlice(s, x, {0, 2}, {0, 0}, {2, -1}, Masks(1, 0b11));
  EXPECT_EQ(y.shape().DebugString(), "[?,3]");
  EXPECT_TRUE(TensorNear(RunOne(s, {{x, Iota(9, {3, 3})}}, y),
                         {2, 1, 0, 8, 7, 6}, {2, 3}));
}

TEST(StridedSliceTest, AttributeErrors) {
  struct Case {
    std::vector<int64_t> begin, end, strides;
    StridedSliceOptions masks;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {{0, 0}, {1, 1}, {1, 0}, {}, "strides [1,0] has stride 0 in dimension 1"},
      {{0}, {1, 1}, {1}, {}, "must have the same length"},
      {{0, 0, 0},
       {1, 1, 1},
       {1, 1, 1},
       {},
       "has 3 entries but input 'x' (shape [2,3]) has rank 2"},
      {{0, 5},
       {1, 1},
       {1, 1},
       Masks(0, 0, 0b10),
       "index 5 (shrink_axis_mask) is out of range for dimension 1 of size 3"},
      {{0, 1},
       {1, 1},
       {1, -1},
       Masks(0, 0, 0b10),
       "stride -1 in dimension 1 with shrink_axis_mask"},
      {{0},
       {1},
       {1},
       Masks(0b100, 0),
       "begin_mask 4 has bits outside the 1 sliced"},
  };
  for (const Case& c : cases) {
    Scope s = Scope::NewRootScope();
    StridedSlice(s.WithOpName("ss"), Const(s, Iota(6, {2, 3})), c.begin, c.end,
                 c.strides, c.masks);
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    const std::string msg(s.status().message());
    EXPECT_NE(msg.find("StridedSlice 'ss'"), std::string::npos) << msg;
    EXPECT_NE(msg.find(c.expected), std::string::npos) << msg;
  }
}

TEST(StridedSliceTest, RunTimeShrinkIndexOutOfRange) {
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, {-1});
  Output y = StridedSlice(s.WithOpName("ss"), x, {4}, {5}, {1}, Masks(0, 0, 1));
  auto out = ::ipuflow::testing::RunGraph(s, {{x, Iota(3, {3})}}, {y});
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find("StridedSlice 'ss': index 4"),
            std::string::npos)
      << out.status();
}

TEST(StridedSliceTest, GradScattersIntoZeros) {
  Scope s = Scope::NewRootScope();
  Output like = Placeholder(s, DType::kFloat32, {2, 4});
  Output dx = StridedSliceGrad(s, Const<float>(s, {1, 2}, {2}), like, {1, 3},
                               {0, 0}, {1, -2}, Masks(0, 0b10, 0b01));
  EXPECT_TRUE(TensorNear(RunOne(s, {{like, Iota(8, {2, 4})}}, dx),
                         {0, 0, 0, 0, 0, 2, 0, 1}, {2, 4}));
}

TEST(StridedSliceTest, GradRejectsWrongDyShape) {
  Scope s = Scope::NewRootScope();
  Output like = Placeholder(s, DType::kFloat32, {2, 4});
  StridedSliceGrad(s.WithOpName("g"), Const<float>(s, {1, 2, 3}, {3}), like,
                   {0}, {2}, {1});
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("StridedSliceGrad 'g': input 'dy' has "
                                      "shape [3] but the slice of input "
                                      "'like' (shape [2,4]) has shape [2,4]"),
            std::string::npos)
      << s.status();
}

TEST(StridedSliceTest, Gradient) {
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, {4, 5, 3});
  Output y = StridedSlice(s, x, {3, 0, 1}, {0, 5, 2}, {-2, 2, 1},
                          Masks(0, 0b01, 0b100));
  EXPECT_EQ(y.shape(), TensorShape({2, 3}));
  auto err = MaxGradientError(s, {x}, {RandomTensor({4, 5, 3}, -1, 1, 1)}, y);
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LT(*err, 1e-3);
}

TEST(StridedSliceTest, GradOfGrad) {
  Scope s = Scope::NewRootScope();
  Output dy = Placeholder(s, DType::kFloat32, {2});
  Output like = Const(s, Iota(8, {2, 4}));
  Output dx = StridedSliceGrad(s, dy, like, {1, 3}, {0, 0}, {1, -2},
                               Masks(0, 0b10, 0b01));
  auto err = MaxGradientError(s, {dy}, {RandomTensor({2}, -1, 1, 1)}, dx);
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LT(*err, 1e-3);
}

}  // namespace
}  // namespace ipuflow::ops
