#include "ops/nn/dropout.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/gradients.h"
#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"

namespace ipuflow::ops {
namespace {

using ::ipuflow::testing::RandomTensor;
using ::ipuflow::testing::RunGraph;
using ::ipuflow::testing::RunOne;
using ::ipuflow::testing::TensorNear;

// Runs `fetches` `runs` times on one session.
std::vector<std::vector<Tensor>> RunRepeatedly(
    const Scope& s, const std::vector<Output>& fetches, int runs) {
  Session session(s.graph());
  std::vector<std::vector<Tensor>> all;
  for (int i = 0; i < runs; ++i) {
    std::vector<Tensor> out;
    absl::Status st = session.Run({}, fetches, &out);
    EXPECT_TRUE(st.ok()) << st;
    all.push_back(out);
  }
  return all;
}

TEST(DropoutTest, StatisticsAndScaling) {
  Scope s = Scope::NewRootScope();
  const int64_t n = 20000;
  auto d =
      Dropout(s, Const(s, Tensor::Filled(DType::kFloat32, {n}, 2.0)), 0.3f, 7);
  auto out = RunGraph(s, {}, {d.output, d.mask});
  ASSERT_TRUE(out.ok()) << out.status();
  const auto y = (*out)[0].ToVector<float>();
  const auto mask = (*out)[1].ToVector<float>();
  int64_t zeros = 0;
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (y[i] == 0) {
      ++zeros;
      EXPECT_EQ(mask[i], 0);
    } else {
      EXPECT_FLOAT_EQ(y[i], 2.0f / 0.7f);
      EXPECT_FLOAT_EQ(mask[i], 1.0f / 0.7f);
    }
    sum += y[i];
  }
  // Binomial(20000, 0.3): standard deviation 0.0032 for the rate of zeros;
  // the tolerances are > 4 sigma.
  EXPECT_NEAR(static_cast<double>(zeros) / n, 0.3, 0.015);
  EXPECT_NEAR(sum / n, 2.0, 0.06);
}

TEST(DropoutTest, RateZeroIsIdentityAndFloat16Works) {
  Scope s = Scope::NewRootScope();
  auto d = Dropout(s, Const<float>(s, {1, -2, 3}, {3}), 0.0f);
  EXPECT_TRUE(TensorNear(RunOne(s, {}, d.output), {1, -2, 3}, {3}));
  auto h =
      Dropout(s, Const(s, Tensor::Filled(DType::kFloat16, {64}, 1.0)), 0.5f, 3);
  const Tensor hv = RunOne(s, {}, h.output);
  ASSERT_EQ(hv.dtype(), DType::kFloat16);
  for (int64_t i = 0; i < 64; ++i) {
    EXPECT_TRUE(hv.ElementAsDouble(i) == 0 || hv.ElementAsDouble(i) == 2)
        << hv.ElementAsDouble(i);
  }
}

TEST(DropoutTest, SameSeedSameSequenceNewMaskEachRun) {
  auto build = [](int64_t seed) {
    Scope s = Scope::NewRootScope();
    Output m = Dropout(s, Const(s, Tensor::Filled(DType::kFloat32, {256}, 1.0)),
                       0.5f, seed)
                   .mask;
    return RunRepeatedly(s, {m}, 3);
  };
  const auto a = build(42), b = build(42), c = build(43);
  for (int run = 0; run < 3; ++run) {
    EXPECT_TRUE(TensorNear(a[run][0], b[run][0], 0, 0)) << "run " << run;
    EXPECT_FALSE(TensorNear(a[run][0], c[run][0], 0, 0)) << "run " << run;
  }
  EXPECT_FALSE(TensorNear(a[0][0], a[1][0], 0, 0));
  EXPECT_FALSE(TensorNear(a[1][0], a[2][0], 0, 0));
}

TEST(DropoutTest, RateOutOfRangeNamesTheRate) {
  for (float rate : {1.0f, -0.25f}) {
    Scope s = Scope::NewRootScope();
    Dropout(s.WithOpName("drop"), Const<float>(s, {1}, {1}), rate);
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(s.status().message().find(absl::StrCat(
                  "Dropout 'drop': rate must be in [0, 1), got ", rate)),
              std::string::npos)
        << s.status();
  }
  Scope s = Scope::NewRootScope();
  Dropout(s.WithOpName("drop"), Const<int32_t>(s, {1}, {1}), 0.5f);
  EXPECT_NE(s.status().message().find(
                "Dropout 'drop': input 'x' must be float32 or float16"),
            std::string::npos)
      << s.status();
}

TEST(DropoutTest, GradientUsesTheRunsMask) {
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, {64});
  auto d = Dropout(s, x, 0.5f, 5);
  Output dy = Const(s, RandomTensor({64}, -1, 1, 2));
  std::vector<Output> grads;
  ASSERT_TRUE(AddGradients(s, {d.output}, {x}, {dy}, &grads).ok());
  Session session(s.graph());
  for (int run = 0; run < 3; ++run) {
    std::vector<Tensor> out;
    ASSERT_TRUE(session
                    .Run({{x, RandomTensor({64}, -1, 1, 1)}},
                         {grads[0], d.mask, dy}, &out)
                    .ok());
    for (int64_t i = 0; i < 64; ++i) {
      EXPECT_FLOAT_EQ(out[0].data<float>()[i],
                      out[2].data<float>()[i] * out[1].data<float>()[i]);
    }
  }
}

// sum(r * y) on a fresh Session: every program's first run draws the same
// mask, so y is a fixed (linear) function of x across evaluations.
double Project(const Scope& s, Output x, const Tensor& xv, Output y,
               const Tensor& r) {
  Session session(s.graph());
  std::vector<Tensor> out;
  EXPECT_TRUE(session.Run({{x, xv}}, {y}, &out).ok());
  double sum = 0;
  for (int64_t i = 0; i < r.NumElements(); ++i) {
    sum += out[0].ElementAsDouble(i) * r.ElementAsDouble(i);
  }
  return sum;
}

TEST(DropoutTest, FiniteDifferenceGradientWithFixedMask) {
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, {2, 4});
  auto d = Dropout(s, x, 0.5f, 11);
  const Tensor xv = RandomTensor({2, 4}, -1, 1, 1);
  const Tensor r = RandomTensor({2, 4}, -1, 1, 2);
  std::vector<Output> grads;
  ASSERT_TRUE(AddGradients(s, {d.output}, {x}, {Const(s, r)}, &grads).ok());
  Session session(s.graph());
  std::vector<Tensor> out;
  ASSERT_TRUE(session.Run({{x, xv}}, {grads[0], d.mask}, &out).ok());
  // The mask has both kept and dropped elements, so the check means something.
  const auto mask = out[1].ToVector<float>();
  ASSERT_GT(std::count(mask.begin(), mask.end(), 0.0f), 0);
  ASSERT_GT(std::count(mask.begin(), mask.end(), 2.0f), 0);
  const double delta = 1e-3;
  double max_error = 0;
  for (int64_t i = 0; i < xv.NumElements(); ++i) {
    Tensor plus = xv.Copy(), minus = xv.Copy();
    plus.data<float>()[i] += delta;
    minus.data<float>()[i] -= delta;
    const double numeric =
        (Project(s, x, plus, d.output, r) - Project(s, x, minus, d.output, r)) /
        (plus.data<float>()[i] - minus.data<float>()[i]);
    max_error =
        std::max(max_error, std::abs(out[0].data<float>()[i] - numeric) /
                                std::max(1.0, std::abs(numeric)));
  }
  EXPECT_LT(max_error, 1e-3);
}

TEST(DropoutGradTest, ForwardAndShapeError) {
  Scope s = Scope::NewRootScope();
  Output g = DropoutGrad(s, Const<float>(s, {1, 2, 3}, {3}),
                         Const<float>(s, {0, 2, 2}, {3}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, g), {0, 4, 6}, {3}));
  DropoutGrad(s.WithOpName("g"), Const<float>(s, {1, 2, 3}, {3}),
              Const<float>(s, {1}, {1}));
  EXPECT_NE(s.status().message().find(
                "DropoutGrad 'g': input 'dy' has shape [3] but input 'mask' "
                "has shape [1]"),
            std::string::npos)
      << s.status();
}

}  // namespace
}  // namespace ipuflow::ops
