#include "ops/math/select.h"

#include <cmath>
#include <cstring>
#include <random>

#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"

namespace ipuflow::ops {
namespace {

using ::ipuflow::testing::MaxGradientError;
using ::ipuflow::testing::RandomTensor;
using ::ipuflow::testing::RunOne;
using ::ipuflow::testing::TensorNear;

TEST(SelectTest, SameShapes) {
  Scope s = Scope::NewRootScope();
  Output z = Select(s, Const<bool>(s, {true, false, false, true}, {2, 2}),
                    Const<float>(s, {1, 2, 3, 4}, {2, 2}),
                    Const<float>(s, {10, 20, 30, 40}, {2, 2}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, z), {1, 20, 30, 4}, {2, 2}));
}

TEST(SelectTest, ConditionColumnPicksRowsAndScalarBroadcasts) {
  Scope s = Scope::NewRootScope();
  Output z = Select(s, Const<bool>(s, {false, true}, {2, 1}),
                    Const<int32_t>(s, {1, 2, 3, 4, 5, 6}, {2, 3}),
                    Const(s, Tensor::Scalar<int32_t>(0)));
  EXPECT_EQ(z.shape(), TensorShape({2, 3}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, z), {0, 0, 0, 4, 5, 6}, {2, 3}));
}

TEST(SelectTest, AllThreeBroadcast) {
  Scope s = Scope::NewRootScope();
  // cond [3] along columns, x [2,1] along rows, y [2,3].
  Output z = Select(s, Const<bool>(s, {true, false, true}, {3}),
                    Const<float>(s, {1, 2}, {2, 1}),
                    Const<float>(s, {10, 20, 30, 40, 50, 60}, {2, 3}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, z), {1, 20, 1, 2, 50, 2}, {2, 3}));
}

// The vector path (4-byte types, same shapes): lengths around the 8-lane
// width, bit patterns kept (NaN payloads, -0), against a scalar loop.
TEST(SelectTest, SameShapesVectorPathWithTails) {
  std::mt19937 gen(5);
  std::bernoulli_distribution coin(0.5);
  for (int64_t n : {1, 7, 8, 9, 31, 1001}) {
    Tensor c(DType::kBool, {n});
    Tensor x(DType::kFloat32, {n}), y(DType::kFloat32, {n});
    Tensor xi(DType::kInt32, {n}), yi(DType::kInt32, {n});
    for (int64_t i = 0; i < n; ++i) {
      c.data<bool>()[i] = coin(gen);
      x.data<float>()[i] = i % 5 == 0 ? std::nanf("7") : 1.5f * i;
      y.data<float>()[i] = i % 3 == 0 ? -0.0f : -2.0f * i;
      xi.data<int32_t>()[i] = static_cast<int32_t>(i * 7919);
      yi.data<int32_t>()[i] = -static_cast<int32_t>(i);
    }
    Scope s = Scope::NewRootScope();
    const Tensor z =
        RunOne(s, {}, Select(s, Const(s, c), Const(s, x), Const(s, y)));
    const Tensor zi =
        RunOne(s, {}, Select(s, Const(s, c), Const(s, xi), Const(s, yi)));
    for (int64_t i = 0; i < n; ++i) {
      const bool pick = c.data<bool>()[i];
      const float want = pick ? x.data<float>()[i] : y.data<float>()[i];
      ASSERT_EQ(std::memcmp(&z.data<float>()[i], &want, 4), 0)
          << "n=" << n << " i=" << i;
      ASSERT_EQ(zi.data<int32_t>()[i],
                pick ? xi.data<int32_t>()[i] : yi.data<int32_t>()[i])
          << "n=" << n << " i=" << i;
    }
  }
}

TEST(SelectTest, ConditionMustBeBool) {
  Scope s = Scope::NewRootScope();
  Select(s.WithOpName("sel"), Const<float>(s, {1}, {1}),
         Const<float>(s, {1}, {1}), Const<float>(s, {2}, {1}));
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find(
                "Select 'sel': input 'cond' must be bool, got float32"),
            std::string::npos)
      << s.status();
}

TEST(SelectTest, ShapeErrorNamesAllThreeShapes) {
  Scope s = Scope::NewRootScope();
  Select(s.WithOpName("sel"), Const<bool>(s, {true, false}, {2}),
         Const<float>(s, {1, 2, 3}, {3}), Const<float>(s, {1, 2, 3}, {3}));
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find(
                "Select 'sel': input 'cond' [2], input 'x' [3] and input 'y' "
                "[3] do not broadcast together"),
            std::string::npos)
      << s.status();
}

TEST(SelectTest, GradientRoutesByCondition) {
  Scope s = Scope::NewRootScope();
  Output cond = Const<bool>(s, {true, false, false, true, true, false}, {2, 3});
  Output x = Placeholder(s, DType::kFloat32, {2, 3});
  Output y = Placeholder(s, DType::kFloat32, {3});
  absl::StatusOr<double> err = MaxGradientError(
      s, {x, y}, {RandomTensor({2, 3}, -1, 1, 1), RandomTensor({3}, -1, 1, 2)},
      Select(s, cond, x, y));
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LT(*err, 1e-3);
}

}  // namespace
}  // namespace ipuflow::ops
