#include "ops/math/cast.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/gradients.h"
#include "core/half.h"
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

TEST(CastTest, FloatToIntegersTruncatesTowardZero) {
  Scope s = Scope::NewRootScope();
  Output x = Const<float>(s, {1.7f, -1.7f, 0.f, 3.f}, {4});
  Output i32 = Cast(s, x, DType::kInt32);
  EXPECT_EQ(i32.dtype(), DType::kInt32);
  EXPECT_TRUE(TensorNear(RunOne(s, {}, i32), {1, -1, 0, 3}, {4}));
  EXPECT_TRUE(
      TensorNear(RunOne(s, {}, Cast(s, x, DType::kInt64)), {1, -1, 0, 3}, {4}));
}

// Issue 22: inf, NaN and out-of-range floats gave INT_MIN (undefined
// behaviour in C++); they saturate, and NaN is 0, for float32 and float16.
TEST(CastTest, FloatToIntegersSaturatesAndNaNIsZero) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> x = {inf,   -inf,  std::nanf(""), 3e9f,
                                -3e9f, 1e19f, -1e19f,        2147483520.f};
  const std::vector<int64_t> i32 = {INT32_MAX, INT32_MIN, 0,
                                    INT32_MAX, INT32_MIN, INT32_MAX,
                                    INT32_MIN, 2147483520};
  const std::vector<int64_t> i64 = {INT64_MAX,  INT64_MIN,   0,
                                    3000000000, -3000000000, INT64_MAX,
                                    INT64_MIN,  2147483520};
  for (DType from : {DType::kFloat32, DType::kFloat16}) {
    Scope s = Scope::NewRootScope();
    Output in = Const<float>(s, x, {8});
    if (from == DType::kFloat16) in = Cast(s, in, from);
    auto out = RunGraph(
        s, {}, {Cast(s, in, DType::kInt32), Cast(s, in, DType::kInt64)});
    ASSERT_TRUE(out.ok()) << out.status();
    for (int i = 0; i < 8; ++i) {
      // float16 holds neither 3e9 nor 2147483520: it saturated to inf.
      const bool big = from == DType::kFloat16 && (i == 3 || i == 4 || i == 7);
      const int64_t want32 = big ? (i == 4 ? INT32_MIN : INT32_MAX) : i32[i];
      const int64_t want64 = big ? (i == 4 ? INT64_MIN : INT64_MAX) : i64[i];
      EXPECT_EQ((*out)[0].data<int32_t>()[i], want32)
          << DTypeName(from) << " " << x[i];
      EXPECT_EQ((*out)[1].data<int64_t>()[i], want64)
          << DTypeName(from) << " " << x[i];
    }
  }
}

TEST(CastTest, ToAndFromBool) {
  Scope s = Scope::NewRootScope();
  Output b = Cast(s, Const<float>(s, {0.f, 0.5f, -2.f}, {3}), DType::kBool);
  EXPECT_TRUE(TensorNear(RunOne(s, {}, b), {0, 1, 1}, {3}));
  Output f = Cast(s, Const<bool>(s, {true, false}, {2}), DType::kFloat32);
  EXPECT_TRUE(TensorNear(RunOne(s, {}, f), {1, 0}, {2}));
  Output h = Cast(s, Const<bool>(s, {true, false}, {2}), DType::kFloat16);
  EXPECT_TRUE(TensorNear(RunOne(s, {}, h), {1, 0}, {2}));
}

TEST(CastTest, BetweenIntegersAndHalf) {
  Scope s = Scope::NewRootScope();
  Output h = Cast(s, Const<int64_t>(s, {-3, 2048}, {2}), DType::kFloat16);
  EXPECT_TRUE(TensorNear(RunOne(s, {}, h), {-3, 2048}, {2}));
  Output i = Cast(s, h, DType::kInt32);
  EXPECT_TRUE(TensorNear(RunOne(s, {}, i), {-3, 2048}, {2}));
  Output wrap =
      Cast(s, Const<int64_t>(s, {(int64_t{1} << 32) | 5}, {1}), DType::kInt32);
  EXPECT_TRUE(TensorNear(RunOne(s, {}, wrap), {5}, {1}));
  Output f = Cast(s, Const<half>(s, {half(0.5f)}, {1}), DType::kFloat32);
  EXPECT_TRUE(TensorNear(RunOne(s, {}, f), {0.5}, {1}));
}

TEST(CastTest, SameDTypeForwardsTheInput) {
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kInt32, {2});
  Output y = Cast(s, x, DType::kInt32);
  Tensor v = Tensor::FromVector<int32_t>({4, 5});
  absl::StatusOr<std::vector<Tensor>> out = RunGraph(s, {{x, v}}, {y});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorNear((*out)[0], {4, 5}, {2}));
  EXPECT_TRUE((*out)[0].SharesBufferWith(v));
}

TEST(CastTest, ResourceIsRejected) {
  Scope s = Scope::NewRootScope();
  Cast(s.WithOpName("c"), Const<float>(s, {1}, {1}), DType::kResource);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find(
                "Cast 'c': cannot cast input 'x' from float32 to resource"),
            std::string::npos)
      << s.status();
}

TEST(CastTest, GradientBetweenFloats) {
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat16, {2, 2});
  // float16 -> float32 is exact, so finite differences on x are exact too.
  auto err = MaxGradientError(s, {x},
                              {RandomTensor({2, 2}, -1, 1, 1, DType::kFloat16)},
                              Cast(s, x, DType::kFloat32));
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LT(*err, 1e-3);
}

TEST(CastTest, GradientIsCastBackAndStopsAtIntegers) {
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, {3});
  Output h = Cast(s, x, DType::kFloat16);
  Output i = Cast(s, x, DType::kInt32);
  std::vector<Output> grads;
  Output seed = Const<half>(s, {half(1.f), half(2.f), half(0.5f)}, {3});
  ASSERT_TRUE(AddGradients(s, {h}, {x}, {seed}, &grads).ok()) << s.status();
  std::vector<Output> int_grads;
  ASSERT_TRUE(AddGradients(s, {i}, {x}, {}, &int_grads).ok()) << s.status();
  Tensor v = Tensor::FromVector<float>({1, 2, 3});
  absl::StatusOr<std::vector<Tensor>> out =
      RunGraph(s, {{x, v}}, {grads[0], int_grads[0]});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].dtype(), DType::kFloat32);
  EXPECT_TRUE(TensorNear((*out)[0], {1, 2, 0.5}, {3}));
  EXPECT_TRUE(TensorNear((*out)[1], {0, 0, 0}, {3}));
}

}  // namespace
}  // namespace ipuflow::ops
