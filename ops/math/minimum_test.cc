#include "ops/math/minimum.h"

#include <cmath>
#include <limits>

#include "core/gradients.h"
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

TEST(MinimumTest, ElementWise) {
  Scope s = Scope::NewRootScope();
  Output z = Minimum(s, Const<float>(s, {1, 5, 3}, {3}),
                     Const<float>(s, {4, 2, 3}, {3}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, z), {1, 2, 3}, {3}));
}

TEST(MinimumTest, BroadcastsAndIntegers) {
  Scope s = Scope::NewRootScope();
  Output z = Minimum(s, Const<float>(s, {1, 3}, {2, 1}),
                     Const<float>(s, {2, 2}, {1, 2}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, z), {1, 1, 2, 2}, {2, 2}));
  Output zi = Minimum(s, Const<int32_t>(s, {3, -4}, {2}),
                      Const<int32_t>(s, {-2, -1}, {2}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, zi), {-2, -4}, {2}));
}

TEST(MinimumTest, NanPropagatesFromEitherSide) {
  Scope s = Scope::NewRootScope();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // 9 elements so that both Eigen's vectorised and scalar paths see a NaN.
  std::vector<float> a(9, 1.f), b(9, 2.f);
  a[0] = nan;
  b[1] = nan;
  a[8] = nan;
  Tensor t = RunOne(
      s, {}, Minimum(s, Const<float>(s, a, {9}), Const<float>(s, b, {9})));
  EXPECT_TRUE(std::isnan(t.data<float>()[0]));
  EXPECT_TRUE(std::isnan(t.data<float>()[1]));
  EXPECT_TRUE(std::isnan(t.data<float>()[8]));
  EXPECT_FALSE(std::isnan(t.data<float>()[2]));
}

TEST(MinimumTest, ShapeErrorNamesNodeAndShapes) {
  Scope s = Scope::NewRootScope();
  Minimum(s.WithOpName("bad"), Const<float>(s, {1, 2}, {2}),
          Const<float>(s, {1, 2, 3}, {3}));
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("Minimum 'bad'"), std::string::npos);
  EXPECT_NE(s.status().message().find("[2] and [3]"), std::string::npos)
      << s.status();
}

TEST(MinimumTest, TiesSendTheGradientToX) {
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, {2});
  Output y = Placeholder(s, DType::kFloat32, {2});
  std::vector<Output> grads;
  ASSERT_TRUE(AddGradients(s, {Minimum(s, x, y)}, {x, y}, {}, &grads).ok());
  Tensor v = Tensor::FromVector<float>({1, 2});
  absl::StatusOr<std::vector<Tensor>> g = RunGraph(s, {{x, v}, {y, v}}, grads);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(TensorNear((*g)[0], {1, 1}, {2}));
  EXPECT_TRUE(TensorNear((*g)[1], {0, 0}, {2}));
}

TEST(MinimumTest, GradientWithBroadcast) {
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, {3, 4});
  Output y = Placeholder(s, DType::kFloat32, {4});
  // Random values are never within the 1e-3 step of each other here, so the
  // finite differences stay away from the kink at x == y.
  absl::StatusOr<double> err = MaxGradientError(
      s, {x, y}, {RandomTensor({3, 4}, -1, 1, 1), RandomTensor({4}, -1, 1, 2)},
      Minimum(s, x, y));
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LT(*err, 1e-3);
}

}  // namespace
}  // namespace ipuflow::ops
