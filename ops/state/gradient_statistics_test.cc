#include "ops/state/gradient_statistics.h"

#include <cmath>
#include <limits>

#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/math/cast.h"

namespace ipuflow::ops {
namespace {

using ::ipuflow::testing::RunGraph;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

std::vector<float> Counts(DType dtype, const std::vector<float>& x,
                          float edge) {
  Scope s = Scope::NewRootScope();
  Output in = Const<float>(s, x, {static_cast<int64_t>(x.size())});
  if (dtype == DType::kFloat16) in = Cast(s, in, dtype);
  auto [lower, upper] = GradientHistogram(s, in, edge);
  Output bad = NonFiniteCount(s, in);
  EXPECT_TRUE(s.ok()) << s.status();
  absl::StatusOr<std::vector<Tensor>> out =
      RunGraph(s, {}, {lower, upper, bad});
  EXPECT_TRUE(out.ok()) << out.status();
  if (!out.ok()) return {};
  return {(*out)[0].scalar<float>(), (*out)[1].scalar<float>(),
          (*out)[2].scalar<float>()};
}

TEST(GradientStatisticsTest, HistogramOfAbsoluteValues) {
  // PopART's example: {1e-3, -1.2e-4, -2, 1.4e5} with edge 8188 -> {3, 1}
  // (1.4e5 is inf in float16: still upper). |-8188| >= edge is upper;
  // 8184 (exact in float16, where 8187 would round to 8188) is lower.
  for (DType dt : {DType::kFloat32, DType::kFloat16}) {
    EXPECT_EQ(Counts(dt, {1e-3f, -1.2e-4f, -2, 1.4e5f}, 8188),
              (std::vector<float>{3, 1, dt == DType::kFloat16 ? 1.f : 0.f}))
        << DTypeName(dt);
    EXPECT_EQ(Counts(dt, {-8188, 8184, 0}, 8188),
              (std::vector<float>{2, 1, 0}));
  }
}

TEST(GradientStatisticsTest, NonFiniteCountAndNaNIsUpper) {
  EXPECT_EQ(Counts(DType::kFloat32, {kInf, -kInf, kNaN, 1}, 8188),
            (std::vector<float>{1, 3, 3}));
}

// Issue 22: with nanoo off a float16 overflow saturates at 65504 instead of
// becoming inf; GradScaler's count takes +-65504 as an overflow (float32's
// 65504 is an ordinary value).
TEST(GradientStatisticsTest, SaturatedFloat16CountsAsNonFinite) {
  EXPECT_EQ(Counts(DType::kFloat16, {65504, -65504, 65472, 1}, 8188)[2], 2.f);
  EXPECT_EQ(Counts(DType::kFloat32, {65504, -65504, 65472, 1}, 8188)[2], 0.f);
}

TEST(GradientStatisticsTest, ManyElementsCountedExactly) {
  // 10000 elements (several chunks): every third is above the edge.
  std::vector<float> x(10000);
  for (size_t i = 0; i < x.size(); ++i) x[i] = i % 3 == 0 ? -9000.f : 1.f;
  EXPECT_EQ(Counts(DType::kFloat32, x, 8188),
            (std::vector<float>{6666, 3334, 0}));
}

TEST(GradientStatisticsTest, NegativeEdgeIsAnError) {
  Scope s = Scope::NewRootScope();
  GradientHistogram(s.WithOpName("h"), Const(s, 1.f), -1);
  EXPECT_NE(s.status().message().find("edge must be >= 0, got -1"),
            std::string::npos)
      << s.status();
}

}  // namespace
}  // namespace ipuflow::ops
