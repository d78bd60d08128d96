#include "ops/math/neg.h"

#include "core/half.h"
#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"

namespace ipuflow::ops {
namespace {

using ::ipuflow::testing::MaxGradientError;
using ::ipuflow::testing::RandomTensor;
using ::ipuflow::testing::RunOne;
using ::ipuflow::testing::TensorNear;

TEST(NegTest, FloatsAndIntegers) {
  Scope s = Scope::NewRootScope();
  EXPECT_TRUE(TensorNear(RunOne(s, {}, Neg(s, Const<float>(s, {1, -2.5}, {2}))),
                         {-1, 2.5}, {2}));
  EXPECT_TRUE(
      TensorNear(RunOne(s, {}, Neg(s, Const<int32_t>(s, {3, -4, 0}, {3}))),
                 {-3, 4, 0}, {3}));
  EXPECT_TRUE(TensorNear(
      RunOne(s, {}, Neg(s, Const<half>(s, {half(0.5f)}, {1}))), {-0.5}, {1}));
}

TEST(NegTest, BoolIsRejected) {
  Scope s = Scope::NewRootScope();
  Neg(s.WithOpName("n"), Const<bool>(s, {true}, {1}));
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find(
                "Neg 'n': input 'x' is bool; expected a numeric type"),
            std::string::npos)
      << s.status();
}

TEST(NegTest, Gradient) {
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, {2, 3});
  auto err =
      MaxGradientError(s, {x}, {RandomTensor({2, 3}, -1, 1, 1)}, Neg(s, x));
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LT(*err, 1e-3);
}

}  // namespace
}  // namespace ipuflow::ops
