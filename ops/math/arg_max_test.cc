#include "ops/math/arg_max.h"

#include <limits>

#include "core/op_registry.h"
#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/testing/half_check.h"

namespace ipuflow::ops {
namespace {

using ::ipuflow::testing::CompareHalfToFloat;
using ::ipuflow::testing::HalfCheck;

using ::ipuflow::testing::RandomTensor;
using ::ipuflow::testing::RunGraph;
using ::ipuflow::testing::RunOne;
using ::ipuflow::testing::TensorNear;

TEST(ArgMaxTest, AlongEachAxisTiesGiveTheFirst) {
  Scope s = Scope::NewRootScope();
  Output x = Const<float>(s, {1, 5, 3, 7, 2, 7}, {2, 3});
  Output rows = ArgMax(s, x, 1);
  EXPECT_EQ(rows.dtype(), DType::kInt64);
  EXPECT_TRUE(TensorNear(RunOne(s, {}, rows), {1, 0}, {2}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, ArgMax(s, x, -1)), {1, 0}, {2}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, ArgMax(s, x, 0)), {1, 0, 1}, {3}));
}

TEST(ArgMaxTest, Int32OutputAndIntegerInput) {
  Scope s = Scope::NewRootScope();
  Output y = ArgMax(s, Const<int32_t>(s, {-3, -1, -2}, {3}), 0, DType::kInt32);
  EXPECT_EQ(y.dtype(), DType::kInt32);
  EXPECT_TRUE(TensorNear(RunOne(s, {}, y), {1}, {}));
}

TEST(ArgMaxTest, FirstNanWins) {
  Scope s = Scope::NewRootScope();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Output x = Const<float>(s, {1, nan, 9, nan, 0, 2}, {3, 2});
  EXPECT_TRUE(TensorNear(RunOne(s, {}, ArgMax(s, x, 1)), {1, 1, 1}, {3}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, ArgMax(s, x, 0)), {1, 0}, {2}));
}

TEST(ArgMaxTest, LongInnerDimensionMatchesBruteForce) {
  Scope s = Scope::NewRootScope();
  Tensor v = RandomTensor({2, 5, 1300}, -1, 1, 9);
  Tensor got = RunOne(s, {}, ArgMax(s, Const(s, v), 1));
  ASSERT_EQ(got.shape(), TensorShape({2, 1300}));
  for (int64_t o = 0; o < 2; ++o) {
    for (int64_t i = 0; i < 1300; ++i) {
      int64_t best = 0;
      for (int64_t k = 1; k < 5; ++k) {
        if (v.data<float>()[(o * 5 + k) * 1300 + i] >
            v.data<float>()[(o * 5 + best) * 1300 + i]) {
          best = k;
        }
      }
      ASSERT_EQ(got.data<int64_t>()[o * 1300 + i], best) << o << "," << i;
    }
  }
}

TEST(ArgMaxTest, AxisOutOfRangeNamesAxisAndRank) {
  Scope s = Scope::NewRootScope();
  ArgMax(s.WithOpName("am"), Const<float>(s, {1, 2}, {1, 2}), 2);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find(
                "ArgMax 'am': axis 2 is out of range for rank 2"),
            std::string::npos)
      << s.status();
}

TEST(ArgMaxTest, BadOutputTypeAndEmptyAxis) {
  Scope s = Scope::NewRootScope();
  ArgMax(s.WithOpName("am"), Const<float>(s, {1, 2}, {2}), 0, DType::kFloat32);
  EXPECT_NE(s.status().message().find(
                "ArgMax 'am': output_type is float32; expected int32 or int64"),
            std::string::npos)
      << s.status();
  Scope s2 = Scope::NewRootScope();
  ArgMax(s2.WithOpName("e"), Const(s2, Tensor(DType::kFloat32, {2, 0})), 1);
  EXPECT_NE(s2.status().message().find(
                "ArgMax 'e': axis 1 of input 'x' [2,0] is empty"),
            std::string::npos)
      << s2.status();
}

TEST(ArgMaxTest, DeclaresWhyItHasNoGradient) {
  EXPECT_FALSE((*OpRegistry::Global()->Find("ArgMax"))
                   ->not_differentiable_reason()
                   .empty());
}

TEST(ArgMaxTest, Float16MatchesFloat32) {
  absl::StatusOr<HalfCheck> c = CompareHalfToFloat(
      [](const Scope& s, const std::vector<Output>& x) {
        return ArgMax(s, x[0], 1, DType::kInt32);
      },
      {RandomTensor({16, 10}, -1, 1, 1)}, /*gradients=*/false);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->dtype, DType::kInt32);
  EXPECT_LT(c->forward_error, 1e-9);
}

}  // namespace
}  // namespace ipuflow::ops
