#include "ops/math/exp.h"

#include <cmath>

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

TEST(ExpTest, Values) {
  Scope s = Scope::NewRootScope();
  Output y = Exp(s, Const<float>(s, {0, 1, -1}, {3}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, y), {1, 2.7182817f, 0.36787944f}, {3}));
}

TEST(ExpTest, Float16) {
  Scope s = Scope::NewRootScope();
  const std::vector<float> in = {0, 1, -1};
  std::vector<half> h;
  for (float v : in) h.push_back(half(v));
  Output y = Exp(s, Const<half>(s, h, {3}));
  EXPECT_EQ(y.dtype(), DType::kFloat16);
  EXPECT_TRUE(TensorNear(RunOne(s, {}, y), {1, 2.7182817f, 0.36787944f}, {3},
                         2e-3, 2e-3));
}

TEST(ExpTest, DomainErrorsAreValuesNotStatus) {
  Scope s = Scope::NewRootScope();
  Tensor t = RunOne(s, {}, Exp(s, Const<float>(s, {100, -100}, {2})));
  ASSERT_TRUE(t.valid());
  const float* v = t.data<float>();
  EXPECT_TRUE(std::isinf(v[0]));              // Overflow.
  EXPECT_TRUE(v[1] >= 0.f && v[1] < 1e-30f);  // Underflow (may be subnormal).
}

TEST(ExpTest, IntegersAreRejected) {
  Scope s = Scope::NewRootScope();
  Exp(s.WithOpName("u"), Const<int32_t>(s, {1}, {1}));
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find(
                "Exp 'u': input 'x' must be float32 or float16, got int32"),
            std::string::npos)
      << s.status();
}

TEST(ExpTest, Gradient) {
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, {2, 3});
  auto err =
      MaxGradientError(s, {x}, {RandomTensor({2, 3}, -2, 2, 1)}, Exp(s, x));
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LT(*err, 1e-3);
}

}  // namespace
}  // namespace ipuflow::ops
