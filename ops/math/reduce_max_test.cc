#include "ops/math/reduce_max.h"

#include <cmath>
#include <limits>

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

TEST(ReduceMaxTest, Values) {
  Scope s = Scope::NewRootScope();
  Output x = Const<float>(s, {1, 5, 3, -4, -2, -6}, {2, 3});
  EXPECT_TRUE(TensorNear(RunOne(s, {}, ReduceMax(s, x)), {5}, {}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, ReduceMax(s, x, {1})), {5, -2}, {2}));
  EXPECT_TRUE(
      TensorNear(RunOne(s, {}, ReduceMax(s, x, {0}, true)), {1, 5, 3}, {1, 3}));
}

TEST(ReduceMaxTest, IntegersAndHalf) {
  Scope s = Scope::NewRootScope();
  Output xi = Const<int64_t>(s, {-7, -3, -5, -9}, {2, 2});
  EXPECT_TRUE(TensorNear(RunOne(s, {}, ReduceMax(s, xi, {0})), {-5, -3}, {2}));
  Output xh = Const<half>(s, {half(1.f), half(3.f), half(2.f)}, {3});
  EXPECT_TRUE(TensorNear(RunOne(s, {}, ReduceMax(s, xh)), {3}, {}));
}

TEST(ReduceMaxTest, NanPropagatesOnBothPaths) {
  Scope s = Scope::NewRootScope();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Output x = Const<float>(s, {1, nan, 3, 4, 5, 6}, {2, 3});
  Tensor rows = RunOne(s, {}, ReduceMax(s, x, {1}));  // Contiguous rows.
  EXPECT_TRUE(std::isnan(rows.data<float>()[0]));
  EXPECT_EQ(rows.data<float>()[1], 6.f);
  Tensor cols = RunOne(s, {}, ReduceMax(s, x, {0}));  // Accumulated rows.
  EXPECT_EQ(cols.data<float>()[0], 4.f);
  EXPECT_TRUE(std::isnan(cols.data<float>()[1]));
}

TEST(ReduceMaxTest, EmptyIsAnError) {
  Scope s = Scope::NewRootScope();
  Output m = ReduceMax(s.WithOpName("m"),
                       Const(s, Tensor(DType::kFloat32, {2, 0})), {1});
  absl::StatusOr<std::vector<Tensor>> out = RunGraph(s, {}, {m});
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find(
                "ReduceMax 'm': the maximum over zero elements is undefined "
                "(input 'x' has shape [2,0])"),
            std::string::npos)
      << out.status();
}

TEST(ReduceMaxTest, RepeatedAxisIsAnError) {
  Scope s = Scope::NewRootScope();
  ReduceMax(s.WithOpName("m"), Const<float>(s, {1, 2}, {2}), {0, 0});
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find(
                "ReduceMax 'm': axes [0,0] name axis 0 twice (rank 1)"),
            std::string::npos)
      << s.status();
}

TEST(ReduceMaxTest, Gradient) {
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, {3, 4});
  // Distinct random values: no ties within the finite-difference step.
  Tensor v = RandomTensor({3, 4}, -1, 1, 1);
  for (bool keep : {false, true}) {
    auto err = MaxGradientError(s, {x}, {v}, ReduceMax(s, x, {1}, keep));
    ASSERT_TRUE(err.ok()) << err.status();
    EXPECT_LT(*err, 1e-3);
  }
  auto err = MaxGradientError(s, {x}, {v}, ReduceMax(s, x));
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LT(*err, 1e-3);
}

TEST(ReduceMaxTest, TiesShareTheGradient) {
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, {2, 3});
  std::vector<Output> grads;
  ASSERT_TRUE(AddGradients(s, {ReduceMax(s, x, {1})}, {x}, {}, &grads).ok())
      << s.status();
  Tensor v = Tensor::FromVector<float>({1, 3, 3, 2, 2, 2}, {2, 3});
  absl::StatusOr<std::vector<Tensor>> g = RunGraph(s, {{x, v}}, grads);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(
      TensorNear((*g)[0], {0, 0.5, 0.5, 1 / 3.f, 1 / 3.f, 1 / 3.f}, {2, 3}));
}

}  // namespace
}  // namespace ipuflow::ops
