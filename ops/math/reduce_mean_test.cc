#include "ops/math/reduce_mean.h"

#include <cmath>

#include "core/half.h"
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
using ::ipuflow::testing::RunGraph;
using ::ipuflow::testing::RunOne;
using ::ipuflow::testing::TensorNear;

TEST(ReduceMeanTest, Values) {
  Scope s = Scope::NewRootScope();
  Output x = Const<float>(s, {1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_TRUE(TensorNear(RunOne(s, {}, ReduceMean(s, x)), {3.5}, {}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, ReduceMean(s, x, {1})), {2, 5}, {2}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, ReduceMean(s, x, {0}, true)),
                         {2.5, 3.5, 4.5}, {1, 3}));
}

TEST(ReduceMeanTest, IntegersTruncateAndHalfAccumulatesInFloat) {
  Scope s = Scope::NewRootScope();
  Output xi = Const<int32_t>(s, {1, 2, 4, 5}, {2, 2});
  EXPECT_TRUE(TensorNear(RunOne(s, {}, ReduceMean(s, xi, {1})), {1, 4}, {2}));
  std::vector<half> h(3000, half(2.f));
  EXPECT_TRUE(TensorNear(
      RunOne(s, {}, ReduceMean(s, Const<half>(s, h, {3000}))), {2}, {}));
}

TEST(ReduceMeanTest, EmptyIsNanForFloatsAndAnErrorForIntegers) {
  Scope s = Scope::NewRootScope();
  Tensor t = RunOne(
      s, {}, ReduceMean(s, Const(s, Tensor(DType::kFloat32, {2, 0})), {1}));
  ASSERT_EQ(t.NumElements(), 2);
  EXPECT_TRUE(std::isnan(t.data<float>()[0]));
  Output mi = ReduceMean(s.WithOpName("mi"),
                         Const(s, Tensor(DType::kInt32, {2, 0})), {1});
  absl::StatusOr<std::vector<Tensor>> out = RunGraph(s, {}, {mi});
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find("ReduceMean 'mi': the integer mean "
                                        "over zero elements is undefined"),
            std::string::npos)
      << out.status();
}

TEST(ReduceMeanTest, OutOfRangeAxisNamesAxisAndRank) {
  Scope s = Scope::NewRootScope();
  ReduceMean(s.WithOpName("m"), Const<float>(s, {1, 2}, {2}), {-2});
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find(
                "ReduceMean 'm': axis -2 is out of range for rank 1"),
            std::string::npos)
      << s.status();
}

TEST(ReduceMeanTest, Gradient) {
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, {2, 3, 4});
  Tensor v = RandomTensor({2, 3, 4}, -1, 1, 1);
  for (bool keep : {false, true}) {
    auto err = MaxGradientError(s, {x}, {v}, ReduceMean(s, x, {1}, keep));
    ASSERT_TRUE(err.ok()) << err.status();
    EXPECT_LT(*err, 1e-3);
  }
}

TEST(ReduceMeanTest, GradientWithUnknownBatchUsesRunTimeCount) {
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, {-1, 3});
  for (int64_t batch : {2, 5}) {
    auto err = MaxGradientError(s, {x}, {RandomTensor({batch, 3}, -1, 1, 2)},
                                ReduceMean(s, x));
    ASSERT_TRUE(err.ok()) << err.status();
    EXPECT_LT(*err, 1e-3);
  }
}

TEST(ReduceMeanTest, Float16SumsInFloat32AndMatchesFloat32) {
  absl::StatusOr<HalfCheck> c = CompareHalfToFloat(
      [](const Scope& s, const std::vector<Output>& x) {
        return ReduceMean(s, x[0], {0});
      },
      {RandomTensor({4096, 3}, 0, 1, 1)});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->dtype, DType::kFloat16);
  EXPECT_LT(c->forward_error, 2e-3);
  EXPECT_LT(c->gradient_error, 2e-3);
}

TEST(ReduceMeanTest, Float16MeanOfManyValuesIsRoundedOnce) {
  // 4096 x 1.001 summed in float16 would stall at 4096 (spacing 4 above
  // 4096 loses each addend's 0.001); summed in float32 the mean is 1.001.
  Scope s = Scope::NewRootScope();
  Output x = Const(s, Tensor::Filled(DType::kFloat16, {4096}, 1.0009765625));
  Tensor m = RunOne(s, {}, ReduceMean(s, x));
  ASSERT_EQ(m.dtype(), DType::kFloat16);
  EXPECT_EQ(static_cast<float>(m.data<half>()[0]), 1.0009765625f);
}

}  // namespace
}  // namespace ipuflow::ops
