#include "ops/math/sub.h"

#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/testing/half_check.h"

namespace ipuflow::ops {
namespace {

using ::ipuflow::testing::CompareHalfToFloat;
using ::ipuflow::testing::HalfCheck;

using ::ipuflow::testing::MaxGradientError;
using ::ipuflow::testing::RandomTensor;
using ::ipuflow::testing::RunOne;
using ::ipuflow::testing::TensorNear;

TEST(SubTest, BroadcastsRow) {
  Scope s = Scope::NewRootScope();
  Output z = Sub(s, Const<float>(s, {5, 6, 7, 8}, {2, 2}),
                 Const<float>(s, {1, 2}, {2}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, z), {4, 4, 6, 6}, {2, 2}));
}

TEST(SubTest, IntegersAndScalarOnTheLeft) {
  Scope s = Scope::NewRootScope();
  Output z = Sub(s, Const(s, Tensor::Scalar<int64_t>(10)),
                 Const<int64_t>(s, {1, 2, 3}, {3}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, z), {9, 8, 7}, {3}));
}

TEST(SubTest, ShapeErrorNamesNodeAndShapes) {
  Scope s = Scope::NewRootScope();
  Sub(s.WithOpName("bad"), Const<float>(s, {1, 2, 3}, {3}),
      Const<float>(s, {1, 2}, {2}));
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("Sub 'bad'"), std::string::npos);
  EXPECT_NE(s.status().message().find("[3] and [2]"), std::string::npos)
      << s.status();
}

TEST(SubTest, BoolIsRejected) {
  Scope s = Scope::NewRootScope();
  Sub(s.WithOpName("b"), Const<bool>(s, {true}, {1}),
      Const<bool>(s, {false}, {1}));
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("Sub 'b': inputs are bool"),
            std::string::npos)
      << s.status();
}

TEST(SubTest, GradientWithBroadcast) {
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, {3, 4});
  Output y = Placeholder(s, DType::kFloat32, {3, 1});
  absl::StatusOr<double> err = MaxGradientError(
      s, {x, y},
      {RandomTensor({3, 4}, -1, 1, 1), RandomTensor({3, 1}, -1, 1, 2)},
      Sub(s, x, y));
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LT(*err, 1e-3);
}

TEST(SubTest, Float16BroadcastMatchesFloat32) {
  absl::StatusOr<HalfCheck> c = CompareHalfToFloat(
      [](const Scope& s, const std::vector<Output>& x) {
        return Sub(s, x[0], x[1]);
      },
      {RandomTensor({4, 6}, -1, 1, 1), RandomTensor({6}, -1, 1, 2)});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->dtype, DType::kFloat16);
  EXPECT_LT(c->forward_error, 2e-3);
  EXPECT_LT(c->gradient_error, 2e-3);
}

}  // namespace
}  // namespace ipuflow::ops
