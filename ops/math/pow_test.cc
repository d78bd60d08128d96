#include "ops/math/pow.h"

#include <cmath>

#include "core/gradients.h"
#include "core/half.h"
#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"

namespace ipuflow::ops {
namespace {

using ::ipuflow::testing::MaxGradientError;
using ::ipuflow::testing::RandomTensor;
using ::ipuflow::testing::RunOne;
using ::ipuflow::testing::TensorNear;

TEST(PowTest, BroadcastsExponent) {
  Scope s = Scope::NewRootScope();
  Output z = Pow(s, Const<float>(s, {2, 3, 4, 9}, {2, 2}),
                 Const<float>(s, {2, 0.5}, {2}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, z), {4, 1.7320508f, 16, 3}, {2, 2}));
}

TEST(PowTest, DomainErrorsAreValues) {
  Scope s = Scope::NewRootScope();
  Output z =
      Pow(s, Const<float>(s, {-1, 0}, {2}), Const<float>(s, {0.5, -1}, {2}));
  Tensor t = RunOne(s, {}, z);
  EXPECT_TRUE(std::isnan(t.data<float>()[0]));
  EXPECT_TRUE(std::isinf(t.data<float>()[1]));
}

TEST(PowTest, Float16) {
  Scope s = Scope::NewRootScope();
  Output z = Pow(s, Const<half>(s, {half(3.f)}, {1}),
                 Const<half>(s, {half(2.f)}, {1}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, z), {9}, {1}));
}

TEST(PowTest, IntegersAreRejected) {
  Scope s = Scope::NewRootScope();
  Pow(s.WithOpName("p"), Const<int32_t>(s, {2}, {1}),
      Const<int32_t>(s, {3}, {1}));
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find(
                "Pow 'p': input 'x' must be float32 or float16, got int32"),
            std::string::npos)
      << s.status();
}

TEST(PowTest, GradientWithBroadcast) {
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, {2, 3});
  Output y = Placeholder(s, DType::kFloat32, {3});
  // x > 0 so that ln(x) and x^(y-1) are smooth.
  absl::StatusOr<double> err = MaxGradientError(
      s, {x, y},
      {RandomTensor({2, 3}, 0.5, 2, 1), RandomTensor({3}, -1.5, 2.5, 2)},
      Pow(s, x, y));
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LT(*err, 1e-3);
}

// Issue 21: d(x^y)/dx at x = 0, y = 0 is 0 (PyTorch's rule), not
// 0 * 0^-1 = NaN; elsewhere y x^(y-1) as before.
TEST(PowTest, GradientAtZeroToTheZeroIsZero) {
  Scope s = Scope::NewRootScope();
  Output x = Const<float>(s, {0, 0, 2, 0}, {4});
  Output y = Const<float>(s, {0, 2, 0, 1}, {4});
  std::vector<Output> grads;
  ASSERT_TRUE(AddGradients(s, {Pow(s, x, y)}, {x, y}, {}, &grads).ok());
  // dx: 0 (y = 0), 2 * 0 = 0, 0 (y = 0), 1 * 0^0 = 1.
  EXPECT_TRUE(TensorNear(RunOne(s, {}, grads[0]), {0, 0, 0, 1}, {4}, 0, 0));
  // dy: z ln x, 0 where x <= 0; 2^0 ln 2 at x = 2.
  EXPECT_TRUE(
      TensorNear(RunOne(s, {}, grads[1]), {0, 0, 0.6931472f, 0}, {4}, 1e-6));
}

}  // namespace
}  // namespace ipuflow::ops
