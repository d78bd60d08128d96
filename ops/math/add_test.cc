#include "ops/math/add.h"

#include "core/half.h"
#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/math/add_n.h"
#include "ops/testing/half_check.h"

namespace ipuflow::ops {
namespace {

using ::ipuflow::testing::CompareHalfToFloat;
using ::ipuflow::testing::HalfCheck;

using ::ipuflow::testing::MaxGradientError;
using ::ipuflow::testing::RandomTensor;
using ::ipuflow::testing::RunOne;
using ::ipuflow::testing::TensorNear;

TEST(AddTest, SameShape) {
  Scope s = Scope::NewRootScope();
  Output z = Add(s, Const<float>(s, {1, 2, 3, 4}, {2, 2}),
                 Const<float>(s, {10, 20, 30, 40}, {2, 2}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, z), {11, 22, 33, 44}, {2, 2}));
}

TEST(AddTest, BroadcastsRowAndColumn) {
  Scope s = Scope::NewRootScope();
  Output z = Add(s, Const<float>(s, {1, 2}, {2, 1}),
                 Const<float>(s, {10, 20, 30}, {3}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, z), {11, 21, 31, 12, 22, 32}, {2, 3}));
}

TEST(AddTest, IntegersAndScalars) {
  Scope s = Scope::NewRootScope();
  Output z = Add(s, Const<int32_t>(s, {1, 2, 3}, {3}),
                 Const(s, Tensor::Scalar<int32_t>(5)));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, z), {6, 7, 8}, {3}));
}

TEST(AddTest, ShapeErrorNamesBothShapes) {
  Scope s = Scope::NewRootScope();
  Add(s.WithOpName("bad"), Const<float>(s, {1, 2, 3}, {3}),
      Const<float>(s, {1, 2}, {2}));
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("Add 'bad'"), std::string::npos);
  EXPECT_NE(s.status().message().find("[3] and [2]"), std::string::npos)
      << s.status();
}

TEST(AddTest, DTypeMismatchIsAnError) {
  Scope s = Scope::NewRootScope();
  Add(s, Const<float>(s, {1}, {1}), Const<int32_t>(s, {1}, {1}));
  EXPECT_NE(s.status().message().find("use Cast"), std::string::npos)
      << s.status();
}

TEST(AddTest, GradientWithBroadcast) {
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, {3, 4});
  Output y = Placeholder(s, DType::kFloat32, {4});
  Output z = Add(s, x, y);
  absl::StatusOr<double> err = MaxGradientError(
      s, {x, y}, {RandomTensor({3, 4}, -1, 1, 1), RandomTensor({4}, -1, 1, 2)},
      z);
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LT(*err, 1e-3);
}

TEST(AddTest, Float16BroadcastMatchesFloat32) {
  absl::StatusOr<HalfCheck> c = CompareHalfToFloat(
      [](const Scope& s, const std::vector<Output>& x) {
        return Add(s, x[0], x[1]);
      },
      {RandomTensor({4, 1, 6}, -1, 1, 1), RandomTensor({3, 6}, -1, 1, 2)});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->dtype, DType::kFloat16);
  EXPECT_LT(c->forward_error, 2e-3);
  EXPECT_LT(c->gradient_error, 2e-3);
}

TEST(AddTest, MixedDTypesAreAnError) {
  Scope s = Scope::NewRootScope();
  Add(s.WithOpName("a"), Placeholder(s, DType::kFloat16, {2}),
      Placeholder(s, DType::kFloat32, {2}));
  EXPECT_NE(s.status().message().find(
                "Add 'a': input 'x' is float16 but input 'y' is float32"),
            std::string::npos)
      << s.status();
}

TEST(AddTest, AddNFloat16SumsInFloat32AndRoundsOnce) {
  // 2048 + 1 + 1 + 1 + 1: float16 after each add would stay at 2048 (ties
  // to even); summed in float32 and rounded once it is 2052.
  Scope s = Scope::NewRootScope();
  std::vector<Output> terms = {
      Const(s, Tensor::Filled(DType::kFloat16, {9}, 2048))};
  for (int i = 0; i < 4; ++i) {
    terms.push_back(Const(s, Tensor::Filled(DType::kFloat16, {9}, 1)));
  }
  Tensor sum = RunOne(s, {}, AddN(s, terms));
  ASSERT_EQ(sum.dtype(), DType::kFloat16);
  for (int i = 0; i < 9; ++i) {
    EXPECT_EQ(static_cast<float>(sum.data<half>()[i]), 2052.0f);
  }
}

}  // namespace
}  // namespace ipuflow::ops
