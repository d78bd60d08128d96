#include "ops/math/reduce_grad_like.h"

#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/testing/half_check.h"

namespace ipuflow::ops {
namespace {

using ::ipuflow::testing::MaxGradientError;
using ::ipuflow::testing::RandomTensor;
using ::ipuflow::testing::RunGraph;
using ::ipuflow::testing::RunOne;
using ::ipuflow::testing::TensorNear;

TEST(ReduceGradLikeTest, BroadcastsBackWithOrWithoutKeptDims) {
  Scope s = Scope::NewRootScope();
  Output x = Const(s, Tensor::Filled(DType::kFloat32, {2, 3}, 0));
  Output a = ReduceGradLike(s, Const<float>(s, {1, 2}, {2}), x, {1});
  EXPECT_TRUE(TensorNear(RunOne(s, {}, a), {1, 1, 1, 2, 2, 2}, {2, 3}));
  Output b = ReduceGradLike(s, Const<float>(s, {1, 2, 3}, {1, 3}), x, {0});
  EXPECT_TRUE(TensorNear(RunOne(s, {}, b), {1, 2, 3, 1, 2, 3}, {2, 3}));
  Output c = ReduceGradLike(s, Const(s, 6.f), x, {}, /*mean=*/true);
  EXPECT_TRUE(TensorNear(RunOne(s, {}, c), {1, 1, 1, 1, 1, 1}, {2, 3}));
}

TEST(ReduceGradLikeTest, MiddleAxesOfRank4) {
  Scope s = Scope::NewRootScope();
  Output x = Const(s, Tensor::Filled(DType::kFloat32, {2, 2, 3, 2}, 0));
  // dy [2,2]: one value per (n, c); mean over the 6 elements of axes 1, 2.
  Output y = ReduceGradLike(s, Const<float>(s, {6, 12, 18, 24}, {2, 2}), x,
                            {1, 2}, true);
  std::vector<float> want;
  for (float n : {1.f, 3.f}) {
    for (int i = 0; i < 6; ++i) {
      want.push_back(n);
      want.push_back(n + 1);
    }
  }
  EXPECT_TRUE(TensorNear(RunOne(s, {}, y), want, {2, 2, 3, 2}));
}

TEST(ReduceGradLikeTest, WrongDyShapeNamesShapes) {
  Scope s = Scope::NewRootScope();
  ReduceGradLike(s.WithOpName("g"), Const<float>(s, {1, 2, 3}, {3}),
                 Const(s, Tensor::Filled(DType::kFloat32, {2, 3}, 0)), {1});
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find(
                "ReduceGradLike 'g': input 'dy' has shape [3] but input 'x' "
                "[2,3] reduced over its axes has shape [2]"),
            std::string::npos)
      << s.status();
}

TEST(ReduceGradLikeTest, RunTimeShapesAreChecked) {
  Scope s = Scope::NewRootScope();
  Output dy = Placeholder(s, DType::kFloat32, {-1});
  Output x = Placeholder(s, DType::kFloat32, {-1, 3});
  Output y = ReduceGradLike(s.WithOpName("g"), dy, x, {1});
  absl::StatusOr<std::vector<Tensor>> out =
      RunGraph(s,
               {{dy, Tensor(DType::kFloat32, {4})},
                {x, Tensor(DType::kFloat32, {2, 3})}},
               {y});
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find("ReduceGradLike 'g'"),
            std::string::npos)
      << out.status();
}

TEST(ReduceGradLikeTest, GradientIsTheReduction) {
  Scope s = Scope::NewRootScope();
  Output dy = Placeholder(s, DType::kFloat32, {2, 1, 4});
  Output x = Const(s, Tensor::Filled(DType::kFloat32, {2, 3, 4}, 0));
  for (bool mean : {false, true}) {
    auto err = MaxGradientError(s, {dy}, {RandomTensor({2, 1, 4}, -1, 1, 1)},
                                ReduceGradLike(s, dy, x, {-2}, mean));
    ASSERT_TRUE(err.ok()) << err.status();
    EXPECT_LT(*err, 1e-3);
  }
}

TEST(ReduceGradLikeTest, Float16MeanGradientMatchesFloat32) {
  for (bool mean : {false, true}) {
    absl::StatusOr<testing::HalfCheck> c = testing::CompareHalfToFloat(
        [&](const Scope& s, const std::vector<Output>& x) {
          return ReduceGradLike(s, x[0], x[1], {1}, mean);
        },
        {testing::RandomTensor({40, 1}, -3, 3, 1),
         testing::RandomTensor({40, 40}, -1, 1, 2)},
        /*gradients=*/false);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->dtype, DType::kFloat16);
    EXPECT_LT(c->forward_error, 1e-3) << mean;
  }
}

}  // namespace
}  // namespace ipuflow::ops
