#include "ops/math/square.h"

#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"

namespace ipuflow::ops {
namespace {

using ::ipuflow::testing::MaxGradientError;
using ::ipuflow::testing::RandomTensor;
using ::ipuflow::testing::RunOne;
using ::ipuflow::testing::TensorNear;

TEST(SquareTest, FloatsAndIntegers) {
  Scope s = Scope::NewRootScope();
  EXPECT_TRUE(
      TensorNear(RunOne(s, {}, Square(s, Const<float>(s, {1.5, -2, 0}, {3}))),
                 {2.25, 4, 0}, {3}));
  EXPECT_TRUE(TensorNear(
      RunOne(s, {}, Square(s, Const<int64_t>(s, {-3, 4}, {2}))), {9, 16}, {2}));
}

TEST(SquareTest, BoolIsRejected) {
  Scope s = Scope::NewRootScope();
  Square(s.WithOpName("sq"), Const<bool>(s, {true}, {1}));
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find(
                "Square 'sq': input 'x' is bool; expected a numeric type"),
            std::string::npos)
      << s.status();
}

TEST(SquareTest, Gradient) {
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, {2, 3});
  auto err =
      MaxGradientError(s, {x}, {RandomTensor({2, 3}, -2, 2, 1)}, Square(s, x));
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LT(*err, 1e-3);
}

}  // namespace
}  // namespace ipuflow::ops
