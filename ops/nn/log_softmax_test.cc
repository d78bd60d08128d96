#include "ops/nn/log_softmax.h"

#include <cmath>

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

TEST(LogSoftmaxTest, RowsAndStability) {
  Scope s = Scope::NewRootScope();
  // Row 2: exp(1000) overflows; log-softmax is still exact.
  Output y = LogSoftmax(s, Const<float>(s, {1, 2, 3, 1000, 0, 1000}, {2, 3}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, y),
                         {-2.40760596f, -1.40760596f, -0.40760596f,
                          -0.69314718f, -1000.69314718f, -0.69314718f},
                         {2, 3}));
}

TEST(LogSoftmaxTest, RejectsIntegers) {
  Scope s = Scope::NewRootScope();
  LogSoftmax(s.WithOpName("ls"), Const<int64_t>(s, {1, 2}, {2}));
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find(
                "LogSoftmax 'ls': input 'logits' must be float32 or float16, "
                "got int64"),
            std::string::npos)
      << s.status();
}

TEST(LogSoftmaxTest, Gradient) {
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, {2, 2, 3});
  auto err = MaxGradientError(s, {x}, {RandomTensor({2, 2, 3}, -2, 2, 1)},
                              LogSoftmax(s, x));
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LT(*err, 1e-3);
}

TEST(LogSoftmaxGradTest, ForwardAndSecondOrderGradient) {
  Scope s = Scope::NewRootScope();
  // dy - exp(y) * sum(dy), exp(y) = [0.25, 0.75], sum(dy) = 4.
  Output g = LogSoftmaxGrad(
      s, Const<float>(s, {std::log(0.25f), std::log(0.75f)}, {1, 2}),
      Const<float>(s, {1, 3}, {1, 2}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, g), {0, 0}, {1, 2}));
  Output y = Placeholder(s, DType::kFloat32, {2, 3});
  Output dy = Placeholder(s, DType::kFloat32, {2, 3});
  auto err = MaxGradientError(
      s, {y, dy},
      {RandomTensor({2, 3}, -2, 0, 1), RandomTensor({2, 3}, -1, 1, 2)},
      LogSoftmaxGrad(s, y, dy));
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LT(*err, 1e-3);
}

TEST(LogSoftmaxTest, Float16KernelAndGradientMatchFloat32) {
  absl::StatusOr<HalfCheck> c = CompareHalfToFloat(
      [](const Scope& s, const std::vector<Output>& x) {
        return LogSoftmax(s, x[0]);
      },
      {RandomTensor({8, 12}, -3, 3, 1)});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->dtype, DType::kFloat16);
  EXPECT_LT(c->forward_error, 2e-3);
  EXPECT_LT(c->gradient_error, 2e-3);
}

}  // namespace
}  // namespace ipuflow::ops
