#include "ops/nn/sparse_softmax_cross_entropy_with_logits.h"

#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/half.h"
#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/math/cast.h"
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

TEST(SparseSoftmaxCrossEntropyTest, LossAndBackprop) {
  const float ln2 = std::log(2.0f);
  Scope s = Scope::NewRootScope();
  // Row 0: softmax [.25, .25, .5], label 2. Row 1: softmax [.5, 0, .5] (exp
  // would overflow without the max trick), label 0.
  Output logits = Const<float>(s, {0, 0, ln2, 1000, 0, 1000}, {2, 3});
  for (DType dt : {DType::kInt32, DType::kInt64}) {
    Output labels = dt == DType::kInt32 ? Const<int32_t>(s, {2, 0}, {2})
                                        : Const<int64_t>(s, {2, 0}, {2});
    auto xent = SparseSoftmaxCrossEntropyWithLogits(s, logits, labels);
    auto out = RunGraph(s, {}, {xent.loss, xent.backprop});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_TRUE(TensorNear((*out)[0], {ln2, ln2}, {2}));
    EXPECT_TRUE(
        TensorNear((*out)[1], {0.25, 0.25, -0.5, -0.5, 0, 0.5}, {2, 3}));
  }
  // Row 1 with label 1: 1000 + ln2.
  Output mean =
      SoftmaxCrossEntropyLoss(s, logits, Const<int32_t>(s, {2, 1}, {2}));
  EXPECT_EQ(mean.shape(), TensorShape());
  EXPECT_TRUE(TensorNear(RunOne(s, {}, mean), {500 + ln2}, {}, 1e-3));
}

// By hand: logits [1, 2, 3], label 2: softmax = [1, e, e^2] / (1 + e + e^2)
// = [0.0900306, 0.2447285, 0.6652410]; loss = log(1 + e^-1 + e^-2) =
// 0.4076059. One row shorter than a SIMD packet (only the masked tail), in
// float32 and in float16 (computed in float32, rounded once: tolerances of
// float16's half-ulp, 2^-11 relative).
TEST(SparseSoftmaxCrossEntropyTest, HandComputedRowFloat32AndFloat16) {
  for (DType dt : {DType::kFloat32, DType::kFloat16}) {
    Scope s = Scope::NewRootScope();
    Output logits = Const<float>(s, {1, 2, 3}, {1, 3});
    if (dt == DType::kFloat16) logits = Cast(s, logits, dt);
    auto xent = SparseSoftmaxCrossEntropyWithLogits(
        s, logits, Const<int32_t>(s, {2}, {1}));
    auto out = RunGraph(s, {}, {xent.loss, xent.backprop});
    ASSERT_TRUE(out.ok()) << out.status();
    const double tol = dt == DType::kFloat16 ? 5e-4 : 1e-6;
    EXPECT_EQ((*out)[0].dtype(), dt);
    EXPECT_TRUE(TensorNear((*out)[0], {0.4076059f}, {1}, tol, tol));
    EXPECT_TRUE(TensorNear((*out)[1], {0.0900306f, 0.2447285f, -0.3347590f},
                           {1, 3}, tol, tol));
  }
}

// The scalar definition, in double: what the vectorised kernel must give
// for every row length around the SIMD packet widths (4, 8 and 16 lanes:
// whole packets, a masked tail, both), with labels in the tail.
TEST(SparseSoftmaxCrossEntropyTest, VectorisedRowsMatchScalarReference) {
  for (int64_t c : {1, 3, 7, 8, 9, 10, 15, 16, 17, 31, 33}) {
    for (DType dt : {DType::kFloat32, DType::kFloat16}) {
      const int64_t n = 5;
      Tensor x = RandomTensor({n, c}, -6, 6, static_cast<uint32_t>(c));
      float* px = x.data<float>();
      px[c - 1] = 900.0f;  // Row 0: exp would overflow without the max.
      if (dt == DType::kFloat16) {
        // Round the logits to float16 first, so both sides see the same
        // inputs.
        for (int64_t i = 0; i < n * c; ++i) {
          px[i] = static_cast<float>(Eigen::half(px[i]));
        }
      }
      std::vector<int32_t> labels;
      std::vector<float> loss, grad;
      for (int64_t r = 0; r < n; ++r) {
        const int32_t label = static_cast<int32_t>((r * 7 + c - 1) % c);
        labels.push_back(label);
        const float* row = px + r * c;
        double m = row[0], sum = 0;
        for (int64_t j = 0; j < c; ++j) m = std::max<double>(m, row[j]);
        for (int64_t j = 0; j < c; ++j) sum += std::exp(row[j] - m);
        loss.push_back(static_cast<float>(std::log(sum) - (row[label] - m)));
        for (int64_t j = 0; j < c; ++j) {
          grad.push_back(static_cast<float>(std::exp(row[j] - m) / sum -
                                            (j == label ? 1.0 : 0.0)));
        }
      }
      Scope s = Scope::NewRootScope();
      Output logits = Const(s, x);
      if (dt == DType::kFloat16) logits = Cast(s, logits, dt);
      auto xent = SparseSoftmaxCrossEntropyWithLogits(
          s, logits, Const<int32_t>(s, labels, {n}));
      auto out = RunGraph(s, {}, {xent.loss, xent.backprop});
      ASSERT_TRUE(out.ok()) << out.status();
      const double tol = dt == DType::kFloat16 ? 1e-3 : 2e-6;
      EXPECT_TRUE(TensorNear((*out)[0], loss, {n}, tol, tol))
          << "c = " << c << ", " << DTypeName(dt);
      EXPECT_TRUE(TensorNear((*out)[1], grad, {n, c}, tol, tol))
          << "c = " << c << ", " << DTypeName(dt);
    }
  }
}

TEST(SparseSoftmaxCrossEntropyTest, LabelOutOfRangeNamesLabelRowAndC) {
  for (int bad : {3, -1}) {
    Scope s = Scope::NewRootScope();
    Output labels = Placeholder(s, DType::kInt32, {2});
    auto xent = SparseSoftmaxCrossEntropyWithLogits(
        s.WithOpName("xent"), Const(s, RandomTensor({2, 3}, -1, 1, 1)), labels);
    auto out = RunGraph(s, {{labels, Tensor::FromVector<int32_t>({0, bad})}},
                        {xent.loss});
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(out.status().message().find(absl::StrCat(
                  "SparseSoftmaxCrossEntropyWithLogits 'xent': label ", bad,
                  " at row 1 is out of range [0, 3)")),
              std::string::npos)
        << out.status();
  }
}

TEST(SparseSoftmaxCrossEntropyTest, ShapeAndDTypeErrors) {
  auto expect_error = [](Output (*make)(const Scope&),
                         const std::string& needle) {
    Scope s = Scope::NewRootScope();
    make(s);
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(s.status().message().find(
                  "SparseSoftmaxCrossEntropyWithLogits 'x': " + needle),
              std::string::npos)
        << s.status();
  };
  expect_error(
      [](const Scope& s) {
        return SparseSoftmaxCrossEntropyWithLogits(
                   s.WithOpName("x"), Placeholder(s, DType::kFloat32, {4, 5}),
                   Placeholder(s, DType::kInt32, {3}))
            .loss;
      },
      "input 'logits' has shape [4,5] but input 'labels' has shape [3]; the "
      "batch sizes must match");
  expect_error(
      [](const Scope& s) {
        return SparseSoftmaxCrossEntropyWithLogits(
                   s.WithOpName("x"), Placeholder(s, DType::kFloat32, {4, 5}),
                   Placeholder(s, DType::kFloat32, {4}))
            .loss;
      },
      "input 'labels' must be int32 or int64, got float32");
  expect_error(
      [](const Scope& s) {
        return SparseSoftmaxCrossEntropyWithLogits(
                   s.WithOpName("x"), Placeholder(s, DType::kFloat32, {4, 5}),
                   Placeholder(s, DType::kInt64, {4, 5}))
            .loss;
      },
      "input 'labels' must have rank 1, got shape [4,5]");
}

TEST(SparseSoftmaxCrossEntropyTest, GradientOfLossAndOfBackprop) {
  Scope s = Scope::NewRootScope();
  Output logits = Placeholder(s, DType::kFloat32, {3, 4});
  Output labels = Const<int64_t>(s, {3, 0, 1}, {3});
  auto xent = SparseSoftmaxCrossEntropyWithLogits(s, logits, labels);
  const Tensor v = RandomTensor({3, 4}, -2, 2, 1);
  auto err = MaxGradientError(s, {logits}, {v}, xent.loss);
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LT(*err, 1e-3);
  err = MaxGradientError(s, {logits}, {v}, xent.backprop);
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LT(*err, 1e-3);
  err = MaxGradientError(s, {logits}, {v},
                         SoftmaxCrossEntropyLoss(s, logits, labels));
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LT(*err, 1e-3);
}

TEST(SparseSoftmaxCrossEntropyTest, GradOpForwardAndGradient) {
  Scope s = Scope::NewRootScope();
  Output g = SparseSoftmaxCrossEntropyWithLogitsGrad(
      s, Const<float>(s, {1, 2, 3, 4}, {2, 2}), Const<float>(s, {2, -1}, {2}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, g), {2, 4, -3, -4}, {2, 2}));
  Output bp = Placeholder(s, DType::kFloat32, {2, 3});
  Output dloss = Placeholder(s, DType::kFloat32, {2});
  auto err = MaxGradientError(
      s, {bp, dloss},
      {RandomTensor({2, 3}, -1, 1, 1), RandomTensor({2}, -1, 1, 2)},
      SparseSoftmaxCrossEntropyWithLogitsGrad(s, bp, dloss));
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LT(*err, 1e-3);
}

TEST(SparseSoftmaxCrossEntropyTest, Float16LossAndGradientMatchFloat32) {
  absl::StatusOr<HalfCheck> c = CompareHalfToFloat(
      [](const Scope& s, const std::vector<Output>& x) {
        return SoftmaxCrossEntropyLoss(s, x[0], x[1]);
      },
      {RandomTensor({16, 10}, -3, 3, 1),
       Tensor::FromVector<int32_t>(
           {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1, 2, 3, 4, 5})});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->dtype, DType::kFloat16);
  EXPECT_LT(c->forward_error, 2e-3);
  EXPECT_LT(c->gradient_error, 2e-3);
}

TEST(SparseSoftmaxCrossEntropyTest, Float16OutputsAndMixedGradDTypes) {
  Scope s = Scope::NewRootScope();
  Output logits = Placeholder(s, DType::kFloat16, {4, 3});
  auto xent = SparseSoftmaxCrossEntropyWithLogits(
      s, logits, Placeholder(s, DType::kInt32, {4}));
  EXPECT_EQ(xent.loss.dtype(), DType::kFloat16);
  EXPECT_EQ(xent.backprop.dtype(), DType::kFloat16);
  SparseSoftmaxCrossEntropyWithLogitsGrad(s.WithOpName("g"), xent.backprop,
                                          Placeholder(s, DType::kFloat32, {4}));
  EXPECT_NE(s.status().message().find(
                "SparseSoftmaxCrossEntropyWithLogitsGrad 'g': input "
                "'backprop' is float16 but input 'dloss' is float32"),
            std::string::npos)
      << s.status();
}

}  // namespace
}  // namespace ipuflow::ops
