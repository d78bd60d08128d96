#include "ops/state/initializers.h"

#include <cmath>

#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "ops/state/variable.h"

namespace ipuflow::ops {
namespace {

using ::ipuflow::testing::TensorNear;

// max |x| and the sample variance.
std::pair<double, double> MaxAbsAndVariance(const Tensor& t) {
  double max_abs = 0, sum2 = 0;
  for (int64_t i = 0; i < t.NumElements(); ++i) {
    const double x = t.ElementAsDouble(i);
    max_abs = std::max(max_abs, std::abs(x));
    sum2 += x * x;
  }
  return {max_abs, sum2 / t.NumElements()};
}

TEST(GlorotUniformTest, MatrixLimit) {
  // [300, 100]: limit = sqrt(6 / 400); variance limit^2 / 3 = 0.005.
  Scope s = Scope::NewRootScope();
  VariableHandle w =
      Variable(s.WithOpName("w"), GlorotUniform(s, {300, 100}, /*seed=*/1));
  auto [max_abs, var] = MaxAbsAndVariance(testing::RunOne(s, {}, w.value));
  const double limit = std::sqrt(6.0 / 400);
  EXPECT_LE(max_abs, limit);
  EXPECT_GT(max_abs, 0.99 * limit);
  EXPECT_NEAR(var, limit * limit / 3, 2e-4);
}

TEST(GlorotUniformTest, ConvKernelUsesReceptiveField) {
  // [3, 3, 4, 8]: fan_in = 36, fan_out = 72, limit = sqrt(6 / 108).
  Scope s = Scope::NewRootScope();
  Output k = GlorotUniform(s, {3, 3, 4, 8}, 2);
  auto [max_abs, var] = MaxAbsAndVariance(testing::RunOne(s, {}, k));
  const double limit = std::sqrt(6.0 / 108);
  EXPECT_LE(max_abs, limit);
  EXPECT_GT(max_abs, 0.95 * limit);
}

TEST(GlorotUniformTest, VectorAndFloat16) {
  // [24]: fan_in = fan_out = 24, limit = 0.5.
  Scope s = Scope::NewRootScope();
  Output b = GlorotUniform(s, {24}, 3, DType::kFloat16);
  Tensor t = testing::RunOne(s, {}, b);
  EXPECT_EQ(t.dtype(), DType::kFloat16);
  EXPECT_LE(MaxAbsAndVariance(t).first, 0.5);
}

TEST(ZerosTest, ZerosOfShapeAndDType) {
  Scope s = Scope::NewRootScope();
  VariableHandle b =
      Variable(s.WithOpName("b"), Zeros(s, {2, 2}, DType::kInt32));
  EXPECT_TRUE(
      TensorNear(testing::RunOne(s, {}, b.value), {0, 0, 0, 0}, {2, 2}));
  EXPECT_EQ(b.value.dtype(), DType::kInt32);
}

TEST(ZerosTest, UnknownShapeIsAnError) {
  Scope s = Scope::NewRootScope();
  Zeros(s.WithOpName("z"), {-1});
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("Fill 'z'"), std::string::npos)
      << s.status();
}

}  // namespace
}  // namespace ipuflow::ops
