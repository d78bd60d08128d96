#include "ops/math/rsqrt.h"

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

TEST(RsqrtTest, Values) {
  Scope s = Scope::NewRootScope();
  Output y = Rsqrt(s, Const<float>(s, {1, 4, 0.25}, {3}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, y), {1, 0.5, 2}, {3}));
}

TEST(RsqrtTest, Float16) {
  Scope s = Scope::NewRootScope();
  const std::vector<float> in = {1, 4, 0.25};
  std::vector<half> h;
  for (float v : in) h.push_back(half(v));
  Output y = Rsqrt(s, Const<half>(s, h, {3}));
  EXPECT_EQ(y.dtype(), DType::kFloat16);
  EXPECT_TRUE(TensorNear(RunOne(s, {}, y), {1, 0.5, 2}, {3}, 2e-3, 2e-3));
}

TEST(RsqrtTest, DomainErrorsAreValuesNotStatus) {
  Scope s = Scope::NewRootScope();
  Tensor t = RunOne(s, {}, Rsqrt(s, Const<float>(s, {-1, 0}, {2})));
  ASSERT_TRUE(t.valid());
  const float* v = t.data<float>();
  EXPECT_TRUE(std::isnan(v[0]));
  EXPECT_TRUE(std::isinf(v[1]) && v[1] > 0);
}

TEST(RsqrtTest, IntegersAreRejected) {
  Scope s = Scope::NewRootScope();
  Rsqrt(s.WithOpName("u"), Const<int32_t>(s, {1}, {1}));
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find(
                "Rsqrt 'u': input 'x' must be float32 or float16, got int32"),
            std::string::npos)
      << s.status();
}

TEST(RsqrtTest, Gradient) {
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, {2, 3});
  // x in [0.5, 2): away from 0, where the slope is infinite.
  auto err =
      MaxGradientError(s, {x}, {RandomTensor({2, 3}, 0.5, 2, 1)}, Rsqrt(s, x));
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LT(*err, 1e-3);
}

}  // namespace
}  // namespace ipuflow::ops
