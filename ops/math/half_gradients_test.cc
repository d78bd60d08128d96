// float16 gradients computed in float32 and rounded once (issue 30):
// ReduceLogSumExp's (it used the float16-rounded result) and Erf's (four
// float16 ops and 2/sqrt(pi) rounded to float16), against float64
// references of the float16 inputs, within half a float16 unit.
#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "core/gradients.h"
#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/math/erf.h"
#include "ops/math/reduce_log_sum_exp.h"
#include "ops/testing/half_check.h"

namespace ipuflow::ops {
namespace {

using ::ipuflow::testing::RunGraph;
using ::ipuflow::testing::ToFloat;
using ::ipuflow::testing::ToHalf;

// The gradient of sum(y(x)) with respect to the float16 input x, widened.
std::vector<float> HalfGradient(
    const std::function<Output(const Scope&, Output)>& build,
    const Tensor& x16) {
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat16, x16.shape());
  std::vector<Output> grads;
  EXPECT_TRUE(AddGradients(s, {build(s, x)}, {x}, {}, &grads).ok());
  absl::StatusOr<std::vector<Tensor>> got = RunGraph(s, {{x, x16}}, grads);
  EXPECT_TRUE(got.ok()) << got.status();
  if (!got.ok()) return {};
  EXPECT_EQ((*got)[0].dtype(), DType::kFloat16);
  const Tensor g = ToFloat((*got)[0]);
  return std::vector<float>(g.data<float>(), g.data<float>() + g.NumElements());
}

// Half a float16 unit in the last place of `v` (normal range), with a
// little room for the float32 computation before the one rounding.
double HalfUlp(double v) {
  const double ulp = std::ldexp(1.0, std::ilogb(std::fabs(v)) - 10);
  return 0.5 * ulp * 1.01;
}

TEST(HalfGradientsTest, ReduceLogSumExpUsesTheFloat32Result) {
  // [80, 80]: exp(x - y) with y = 80 + log 2 rounded to float16 (80.6875)
  // gave 0.50293 each.
  {
    const std::vector<float> g = HalfGradient(
        [](const Scope& s, Output x) { return ReduceLogSumExp(s, x, {1}); },
        ToHalf(Tensor::FromVector<float>({80, 80}, {1, 2})));
    ASSERT_EQ(g.size(), 2u);
    EXPECT_EQ(g[0], 0.5f);
    EXPECT_EQ(g[1], 0.5f);
  }
  // Rows of large magnitude (|y| up to 60: the old error was |y| 2^-11
  // relative) against exp(x - y) in float64.
  std::vector<float> values;
  for (int r = 0; r < 6; ++r)
    for (int i = 0; i < 5; ++i) values.push_back(-60 + 20 * r + 0.37f * i * i);
  const Tensor x16 = ToHalf(Tensor::FromVector<float>(values, {6, 5}));
  const Tensor x = ToFloat(x16);
  const std::vector<float> g = HalfGradient(
      [](const Scope& s, Output x) { return ReduceLogSumExp(s, x, {1}); }, x16);
  ASSERT_EQ(g.size(), values.size());
  for (int r = 0; r < 6; ++r) {
    const float* row = x.data<float>() + 5 * r;
    double m = row[0], sum = 0;
    for (int i = 0; i < 5; ++i) m = std::max(m, double{row[i]});
    for (int i = 0; i < 5; ++i) sum += std::exp(row[i] - m);
    const double y = m + std::log(sum);
    for (int i = 0; i < 5; ++i) {
      const double want = std::exp(row[i] - y);
      EXPECT_NEAR(g[5 * r + i], want, HalfUlp(want))
          << "x = " << row[i] << " in row " << r;
    }
  }
}

TEST(HalfGradientsTest, ErfGradientRoundsOnce) {
  // Every float16 in [-3, 3] by steps of 1/32, x = -2.5 included (2 units
  // off before).
  std::vector<float> values;
  for (int i = -96; i <= 96; ++i) values.push_back(i / 32.0f);
  const Tensor x16 = ToHalf(
      Tensor::FromVector<float>(values, {static_cast<int64_t>(values.size())}));
  const std::vector<float> g =
      HalfGradient([](const Scope& s, Output x) { return Erf(s, x); }, x16);
  ASSERT_EQ(g.size(), values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    const double x = values[i];
    const double want = 2 / std::sqrt(M_PI) * std::exp(-x * x);
    EXPECT_NEAR(g[i], want, HalfUlp(want)) << "x = " << x;
  }
}

}  // namespace
}  // namespace ipuflow::ops
