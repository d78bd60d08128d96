#include "ops/math/mul.h"

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

TEST(MulTest, BroadcastsRowAndColumn) {
  Scope s = Scope::NewRootScope();
  Output z = Mul(s, Const<float>(s, {1, 2}, {2, 1}),
                 Const<float>(s, {10, 20, 30}, {3}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, z), {10, 20, 30, 20, 40, 60}, {2, 3}));
}

TEST(MulTest, Int32AndFloat16) {
  Scope s = Scope::NewRootScope();
  Output zi =
      Mul(s, Const<int32_t>(s, {2, -3}, {2}), Const<int32_t>(s, {4, 5}, {2}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, zi), {8, -15}, {2}));
  Output zh = Mul(s, Const<half>(s, {half(1.5f), half(-2.f)}, {2}),
                  Const(s, 2.0, DType::kFloat16));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, zh), {3, -4}, {2}));
}

TEST(MulTest, DTypeMismatchNamesBothInputs) {
  Scope s = Scope::NewRootScope();
  Mul(s.WithOpName("m"), Const<float>(s, {1}, {1}),
      Const<int32_t>(s, {1}, {1}));
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find(
                "Mul 'm': input 'x' is float32 but input 'y' is int32"),
            std::string::npos)
      << s.status();
}

TEST(MulTest, GradientWithBroadcast) {
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, {2, 3});
  Output y = Placeholder(s, DType::kFloat32, {3});
  absl::StatusOr<double> err = MaxGradientError(
      s, {x, y}, {RandomTensor({2, 3}, -1, 1, 1), RandomTensor({3}, -1, 1, 2)},
      Mul(s, x, y));
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LT(*err, 1e-3);
}

TEST(MulTest, Float16BroadcastMatchesFloat32) {
  absl::StatusOr<HalfCheck> c = CompareHalfToFloat(
      [](const Scope& s, const std::vector<Output>& x) {
        return Mul(s, x[0], x[1]);
      },
      {RandomTensor({4, 6}, -1, 1, 1), RandomTensor({4, 1}, -1, 1, 2)});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->dtype, DType::kFloat16);
  EXPECT_LT(c->forward_error, 2e-3);
  EXPECT_LT(c->gradient_error, 2e-3);
}

TEST(MulTest, Float16ScalarMatchesFloat32) {
  absl::StatusOr<HalfCheck> c = CompareHalfToFloat(
      [](const Scope& s, const std::vector<Output>& x) {
        return Mul(s, x[0], x[1]);
      },
      {RandomTensor({}, -1, 1, 3), RandomTensor({3, 5}, -1, 1, 4)});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->dtype, DType::kFloat16);
  EXPECT_LT(c->forward_error, 2e-3);
  EXPECT_LT(c->gradient_error, 2e-3);
}

}  // namespace
}  // namespace ipuflow::ops
