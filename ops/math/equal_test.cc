#include "ops/math/equal.h"

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

using ::ipuflow::testing::RunOne;
using ::ipuflow::testing::TensorNear;

TEST(EqualTest, BroadcastsToBool) {
  Scope s = Scope::NewRootScope();
  Output z = Equal(s, Const<float>(s, {1, 2, 3, 2}, {2, 2}),
                   Const<float>(s, {1, 2}, {2}));
  EXPECT_EQ(z.dtype(), DType::kBool);
  EXPECT_TRUE(TensorNear(RunOne(s, {}, z), {1, 1, 0, 1}, {2, 2}));
}

TEST(EqualTest, IntsBoolsAndNan) {
  Scope s = Scope::NewRootScope();
  Output zi = Equal(s, Const<int64_t>(s, {3, 4}, {2}),
                    Const(s, Tensor::Scalar<int64_t>(4)));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, zi), {0, 1}, {2}));
  Output zb = Equal(s, Const<bool>(s, {true, false}, {2}),
                    Const<bool>(s, {true, true}, {2}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, zb), {1, 0}, {2}));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Output zn =
      Equal(s, Const<float>(s, {nan}, {1}), Const<float>(s, {nan}, {1}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, zn), {0}, {1}));
}

TEST(EqualTest, ErrorsNameNodeAndInputs) {
  Scope s = Scope::NewRootScope();
  Equal(s.WithOpName("eq"), Const<float>(s, {1}, {1}),
        Const<int32_t>(s, {1}, {1}));
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find(
                "Equal 'eq': input 'x' is float32 but input 'y' is int32"),
            std::string::npos)
      << s.status();
  Scope s2 = Scope::NewRootScope();
  Equal(s2.WithOpName("eq2"), Const<float>(s2, {1, 2}, {2}),
        Const<float>(s2, {1, 2, 3}, {3}));
  EXPECT_NE(s2.status().message().find("Equal 'eq2': shapes [2] and [3]"),
            std::string::npos)
      << s2.status();
}

TEST(EqualTest, DeclaresWhyItHasNoGradient) {
  EXPECT_FALSE((*OpRegistry::Global()->Find("Equal"))
                   ->not_differentiable_reason()
                   .empty());
}

TEST(EqualTest, Float16MatchesFloat32) {
  absl::StatusOr<HalfCheck> c = CompareHalfToFloat(
      [](const Scope& s, const std::vector<Output>& x) {
        return Equal(s, x[0], x[1]);
      },
      {RandomTensor({3, 4}, -1, 1, 1), RandomTensor({3, 4}, -1, 1, 1)},
      /*gradients=*/false);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->dtype, DType::kBool);
  EXPECT_LT(c->forward_error, 1e-9);
}

}  // namespace
}  // namespace ipuflow::ops
