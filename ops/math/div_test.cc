#include "ops/math/div.h"

#include <cmath>
#include <limits>

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

TEST(DivTest, FloatsBroadcast) {
  Scope s = Scope::NewRootScope();
  Output z = Div(s, Const<float>(s, {1, 2, 3, 4}, {2, 2}),
                 Const<float>(s, {2, 4}, {2, 1}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, z), {0.5, 1, 0.75, 1}, {2, 2}));
}

TEST(DivTest, FloatDivisionByZeroIsInfNotAnError) {
  Scope s = Scope::NewRootScope();
  Output z = Div(s, Const<float>(s, {1, -1}, {2}), Const(s, 0.0f));
  Tensor t = RunOne(s, {}, z);
  EXPECT_EQ(t.data<float>()[0], std::numeric_limits<float>::infinity());
  EXPECT_EQ(t.data<float>()[1], -std::numeric_limits<float>::infinity());
}

TEST(DivTest, IntegersTruncateTowardZero) {
  Scope s = Scope::NewRootScope();
  Output z = Div(s, Const<int32_t>(s, {7, -7, 7, -7}, {4}),
                 Const<int32_t>(s, {2, 2, -2, -2}, {4}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, z), {3, -3, -3, 3}, {4}));
}

TEST(DivTest, IntMinByMinusOneWraps) {
  Scope s = Scope::NewRootScope();
  const int64_t min = std::numeric_limits<int64_t>::min();
  Output z = Div(s, Const<int64_t>(s, {min, 6}, {2}),
                 Const(s, Tensor::Scalar<int64_t>(-1)));
  Tensor t = RunOne(s, {}, z);
  EXPECT_EQ(t.data<int64_t>()[0], min);
  EXPECT_EQ(t.data<int64_t>()[1], -6);
}

TEST(DivTest, IntegerDivisionByZeroIsAnError) {
  Scope s = Scope::NewRootScope();
  Output z = Div(s.WithOpName("d"), Const<int32_t>(s, {1, 2}, {2}),
                 Const<int32_t>(s, {1, 0}, {2}));
  absl::StatusOr<std::vector<Tensor>> out = RunGraph(s, {}, {z});
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find("Div 'd': integer division by zero"),
            std::string::npos)
      << out.status();
}

TEST(DivTest, ShapeErrorNamesNodeAndShapes) {
  Scope s = Scope::NewRootScope();
  Div(s.WithOpName("bad"), Const<float>(s, {1, 2, 3, 4}, {2, 2}),
      Const<float>(s, {1, 2, 3}, {3}));
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("Div 'bad'"), std::string::npos);
  EXPECT_NE(s.status().message().find("[2,2] and [3]"), std::string::npos)
      << s.status();
}

TEST(DivTest, GradientWithBroadcast) {
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, {2, 3});
  Output y = Placeholder(s, DType::kFloat32, {3});
  // y kept away from 0, where 1/y blows up.
  absl::StatusOr<double> err = MaxGradientError(
      s, {x, y}, {RandomTensor({2, 3}, -1, 1, 1), RandomTensor({3}, 0.5, 2, 2)},
      Div(s, x, y));
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LT(*err, 1e-3);
}

}  // namespace
}  // namespace ipuflow::ops
