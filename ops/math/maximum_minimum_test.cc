// Maximum and Minimum share one parameterised suite: the same inputs, each
// with its own expected values.
#include <cmath>
#include <limits>
#include <ostream>
#include <string>
#include <vector>

#include "core/gradients.h"
#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/math/maximum.h"
#include "ops/math/minimum.h"

namespace ipuflow::ops {
namespace {

using ::ipuflow::testing::MaxGradientError;
using ::ipuflow::testing::RandomTensor;
using ::ipuflow::testing::RunGraph;
using ::ipuflow::testing::RunOne;
using ::ipuflow::testing::TensorNear;

struct ExtremumCase {
  std::string op;
  Output (*build)(const Scope&, Output, Output);
  std::vector<float> element_wise;  // Of [1,5,3] and [4,2,3].
  std::vector<float> broadcast;     // Of [[1],[3]] and [[2,2]].
  std::vector<float> integers;      // Of [3,-4] and [-2,-1].
};

std::ostream& operator<<(std::ostream& os, const ExtremumCase& c) {
  return os << c.op;
}

class ExtremumTest : public ::testing::TestWithParam<ExtremumCase> {};

TEST_P(ExtremumTest, ElementWise) {
  Scope s = Scope::NewRootScope();
  Output z = GetParam().build(s, Const<float>(s, {1, 5, 3}, {3}),
                              Const<float>(s, {4, 2, 3}, {3}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, z), GetParam().element_wise, {3}));
}

TEST_P(ExtremumTest, BroadcastsAndIntegers) {
  Scope s = Scope::NewRootScope();
  Output z = GetParam().build(s, Const<float>(s, {1, 3}, {2, 1}),
                              Const<float>(s, {2, 2}, {1, 2}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, z), GetParam().broadcast, {2, 2}));
  Output zi = GetParam().build(s, Const<int32_t>(s, {3, -4}, {2}),
                               Const<int32_t>(s, {-2, -1}, {2}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, zi), GetParam().integers, {2}));
}

TEST_P(ExtremumTest, NanPropagatesFromEitherSide) {
  Scope s = Scope::NewRootScope();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // 9 elements so that both Eigen's vectorised and scalar paths see a NaN.
  std::vector<float> a(9, 1.f), b(9, 2.f);
  a[0] = nan;
  b[1] = nan;
  a[8] = nan;
  Tensor t = RunOne(
      s, {},
      GetParam().build(s, Const<float>(s, a, {9}), Const<float>(s, b, {9})));
  EXPECT_TRUE(std::isnan(t.data<float>()[0]));
  EXPECT_TRUE(std::isnan(t.data<float>()[1]));
  EXPECT_TRUE(std::isnan(t.data<float>()[8]));
  EXPECT_FALSE(std::isnan(t.data<float>()[2]));
}

TEST_P(ExtremumTest, ShapeErrorNamesNodeAndShapes) {
  Scope s = Scope::NewRootScope();
  GetParam().build(s.WithOpName("bad"), Const<float>(s, {1, 2}, {2}),
                   Const<float>(s, {1, 2, 3}, {3}));
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find(GetParam().op + " 'bad'"),
            std::string::npos);
  EXPECT_NE(s.status().message().find("[2] and [3]"), std::string::npos)
      << s.status();
}

TEST_P(ExtremumTest, TiesSendTheGradientToX) {
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, {2});
  Output y = Placeholder(s, DType::kFloat32, {2});
  std::vector<Output> grads;
  ASSERT_TRUE(
      AddGradients(s, {GetParam().build(s, x, y)}, {x, y}, {}, &grads).ok());
  Tensor v = Tensor::FromVector<float>({1, 2});
  absl::StatusOr<std::vector<Tensor>> g = RunGraph(s, {{x, v}, {y, v}}, grads);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(TensorNear((*g)[0], {1, 1}, {2}));
  EXPECT_TRUE(TensorNear((*g)[1], {0, 0}, {2}));
}

TEST_P(ExtremumTest, GradientWithBroadcast) {
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, {3, 4});
  Output y = Placeholder(s, DType::kFloat32, {4});
  // Random values are never within the 1e-3 step of each other here, so the
  // finite differences stay away from the kink at x == y.
  absl::StatusOr<double> err = MaxGradientError(
      s, {x, y}, {RandomTensor({3, 4}, -1, 1, 1), RandomTensor({4}, -1, 1, 2)},
      GetParam().build(s, x, y));
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LT(*err, 1e-3);
}

INSTANTIATE_TEST_SUITE_P(
    Ops, ExtremumTest,
    ::testing::Values(
        ExtremumCase{"Maximum", Maximum, {4, 5, 3}, {2, 2, 3, 3}, {3, -1}},
        ExtremumCase{"Minimum", Minimum, {1, 2, 3}, {1, 1, 2, 2}, {-2, -4}}),
    [](const ::testing::TestParamInfo<ExtremumCase>& info) {
      return info.param.op;
    });

}  // namespace
}  // namespace ipuflow::ops
