#include "ops/math/greater.h"

#include <limits>

#include "core/half.h"
#include "core/op_registry.h"
#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"

namespace ipuflow::ops {
namespace {

using ::ipuflow::testing::RunOne;
using ::ipuflow::testing::TensorNear;

TEST(GreaterTest, BroadcastsToBool) {
  Scope s = Scope::NewRootScope();
  // [[1,2,3],[4,0,6]] against [2,2,2], broadcast along the rows.
  Output z = Greater(s, Const<float>(s, {1, 2, 3, 4, 0, 6}, {2, 3}),
                     Const<float>(s, {2, 2, 2}, {3}));
  EXPECT_EQ(z.dtype(), DType::kBool);
  EXPECT_EQ(z.shape(), TensorShape({2, 3}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, z), {0, 0, 1, 1, 0, 1}, {2, 3}));
}

TEST(GreaterTest, IntegersHalfAndNan) {
  Scope s = Scope::NewRootScope();
  Output zi = Greater(s, Const<int32_t>(s, {5, -5}, {2}),
                      Const(s, Tensor::Scalar<int32_t>(0)));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, zi), {1, 0}, {2}));
  Output zh = Greater(s, Const<half>(s, {half(5.f), half(-5.f)}, {2}),
                      Const(s, 0.0, DType::kFloat16));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, zh), {1, 0}, {2}));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Output zn = Greater(s, Const<float>(s, {nan, 1}, {2}),
                      Const<float>(s, {1, nan}, {2}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, zn), {0, 0}, {2}));
}

TEST(GreaterTest, BoolInputsAreRejected) {
  Scope s = Scope::NewRootScope();
  Greater(s.WithOpName("cmp"), Const<bool>(s, {true}, {1}),
          Const<bool>(s, {false}, {1}));
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("Greater 'cmp': inputs are bool"),
            std::string::npos)
      << s.status();
}

TEST(GreaterTest, ShapeErrorNamesShapes) {
  Scope s = Scope::NewRootScope();
  Greater(s.WithOpName("cmp"), Const<float>(s, {1, 2}, {2}),
          Const<float>(s, {1, 2, 3}, {3}));
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("Greater 'cmp': shapes [2] and [3]"),
            std::string::npos)
      << s.status();
}

TEST(GreaterTest, DeclaresWhyItHasNoGradient) {
  EXPECT_FALSE((*OpRegistry::Global()->Find("Greater"))
                   ->not_differentiable_reason()
                   .empty());
}

}  // namespace
}  // namespace ipuflow::ops
