// The losses: values by hand, gradients for every input against finite
// differences, float16 against float32, errors, the label smoothing's
// equivalence with the unsmoothed cross-entropy at 0, and GraphDef round
// trips.
#include <cmath>
#include <vector>

#include "core/gradients.h"
#include "core/graph_def.h"
#include "core/session.h"
#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/loss/nll_loss.h"
#include "ops/loss/pointwise_loss.h"
#include "ops/loss/smoothed_cross_entropy.h"
#include "ops/math/reduce_sum.h"
#include "ops/nn/sparse_softmax_cross_entropy_with_logits.h"
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

using LossBuilder = Output (*)(const Scope&, Output, Output,
                               const LossOptions&);

float Scalar(const Scope& s, Output y) {
  Tensor t = RunOne(s, {}, y);
  return t.NumElements() == 1 ? t.data<float>()[0] : NAN;
}

TEST(PointwiseLossTest, ValuesByHand) {
  Scope s = Scope::NewRootScope();
  Output x = Const<float>(s, {1, 2, 3}, {3});
  Output t = Const<float>(s, {0, 2, 5}, {3});
  EXPECT_NEAR(Scalar(s, MSELoss(s, x, t)), 5.0 / 3, 1e-6);
  EXPECT_NEAR(Scalar(s, MSELoss(s, x, t, {.reduction = "sum"})), 5, 1e-6);
  EXPECT_TRUE(TensorNear(RunOne(s, {}, MSELoss(s, x, t, {.reduction = "none"})),
                         {1, 0, 4}, {3}));
  EXPECT_NEAR(Scalar(s, L1Loss(s, x, t)), 1, 1e-6);
  // d = {1, 0, -2}, delta 1: {0.5, 0, 1.5}.
  EXPECT_NEAR(Scalar(s, HuberLoss(s, x, t)), 2.0 / 3, 1e-6);
  // delta 3: all quadratic, {0.5, 0, 2}.
  EXPECT_NEAR(Scalar(s, HuberLoss(s, x, t, {.delta = 3})), 2.5 / 3, 1e-6);
  // BCE: log 2 at (0, 1), log(1 + e^2) at (2, 0).
  Output z = Const<float>(s, {0, 2}, {2});
  Output y = Const<float>(s, {1, 0}, {2});
  EXPECT_NEAR(Scalar(s, BCEWithLogitsLoss(s, z, y)),
              (std::log(2.0) + std::log1p(std::exp(2.0))) / 2, 1e-6);
  EXPECT_NEAR(Scalar(s, BCEWithLogitsLoss(s, z, y, {.pos_weight = 2})),
              (2 * std::log(2.0) + std::log1p(std::exp(2.0))) / 2, 1e-6);
  // Stable far out: x = -100, t = 1 gives 100.
  EXPECT_NEAR(Scalar(s, BCEWithLogitsLoss(s, Const<float>(s, {-100}, {1}),
                                          Const<float>(s, {1}, {1}))),
              100, 1e-4);
  // KL(p || q), p = {0.5, 0.5}, q = {0.25, 0.75}, x = log q.
  const double kl = 0.5 * std::log(2.0) + 0.5 * std::log(2.0 / 3);
  Output lq = Const<float>(s, {std::log(0.25f), std::log(0.75f)}, {1, 2});
  EXPECT_NEAR(Scalar(s, KLDivLoss(s, lq, Const<float>(s, {0.5f, 0.5f}, {1, 2}),
                                  {.reduction = "batchmean"})),
              kl, 1e-6);
  EXPECT_NEAR(
      Scalar(s, KLDivLoss(
                    s, lq,
                    Const<float>(s, {std::log(0.5f), std::log(0.5f)}, {1, 2}),
                    {.reduction = "sum", .log_target = true})),
      kl, 1e-6);
  // A zero target contributes 0 (not 0 * log 0 = NaN).
  EXPECT_TRUE(
      TensorNear(RunOne(s, {},
                        KLDivLoss(s, lq, Const<float>(s, {0.0f, 1.0f}, {1, 2}),
                                  {.reduction = "none"})),
                 {0, -std::log(0.75f)}, {1, 2}));
}

TEST(PointwiseLossTest, GradientsForBothInputs) {
  struct Case {
    const char* name;
    LossBuilder build;
    LossOptions options;
    float t_lo, t_hi;
  };
  const std::vector<Case> cases = {
      {"mse", MSELoss, {}, -2, 2},
      {"mse none", MSELoss, {.reduction = "none"}, -2, 2},
      {"l1", L1Loss, {.reduction = "sum"}, -2, 2},
      {"huber", HuberLoss, {.delta = 0.7f}, -2, 2},
      {"bce", BCEWithLogitsLoss, {.pos_weight = 1.5f}, 0, 1},
      {"kl", KLDivLoss, {.reduction = "batchmean"}, 0.1f, 1},
      {"kl log", KLDivLoss, {.reduction = "none", .log_target = true}, -2, 0},
  };
  for (const Case& c : cases) {
    Scope s = Scope::NewRootScope();
    Output x = Placeholder(s, DType::kFloat32, {3, 4});
    Output t = Placeholder(s, DType::kFloat32, {3, 4});
    auto err = MaxGradientError(s, {x, t},
                                {RandomTensor({3, 4}, -2, 2, 1),
                                 RandomTensor({3, 4}, c.t_lo, c.t_hi, 2)},
                                c.build(s, x, t, c.options));
    ASSERT_TRUE(err.ok()) << c.name << ": " << err.status();
    EXPECT_LT(*err, 2e-3) << c.name;
  }
}

TEST(PointwiseLossTest, Float16MatchesFloat32) {
  absl::StatusOr<HalfCheck> c = CompareHalfToFloat(
      [](const Scope& s, const std::vector<Output>& x) {
        return HuberLoss(s, x[0], x[1], {.reduction = "none"});
      },
      {RandomTensor({4, 8}, -3, 3, 1), RandomTensor({4, 8}, -3, 3, 2)});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->dtype, DType::kFloat16);
  EXPECT_LT(c->forward_error, 2e-3);
  EXPECT_LT(c->gradient_error, 2e-3);
}

TEST(PointwiseLossTest, Errors) {
  Scope s = Scope::NewRootScope();
  MSELoss(s.WithOpName("mse"), Const<float>(s, {1, 2}, {2}),
          Const<float>(s, {1, 2, 3}, {3}));
  EXPECT_NE(s.status().message().find(
                "MSELoss 'mse': input 'input' [2] and input 'target' [3] must "
                "have the same shape"),
            std::string::npos)
      << s.status();
  Scope s2 = Scope::NewRootScope();
  MSELoss(s2, Const<float>(s2, {1}, {1}), Const<float>(s2, {1}, {1}),
          {.reduction = "avg"});
  EXPECT_NE(s2.status().message().find("reduction must be \"none\""),
            std::string::npos)
      << s2.status();
  Scope s3 = Scope::NewRootScope();
  HuberLoss(s3, Const<float>(s3, {1}, {1}), Const<float>(s3, {1}, {1}),
            {.delta = 0});
  EXPECT_NE(s3.status().message().find("delta must be finite and > 0, got 0"),
            std::string::npos)
      << s3.status();
}

TEST(NLLLossTest, ClassWeightsAndIgnoreIndex) {
  Scope s = Scope::NewRootScope();
  const std::vector<float> lp = {-0.5f, -1, -2, -3, -0.25f, -1.5f, -1, -1, -1};
  Output x = Const<float>(s, lp, {3, 3});
  Output labels = Const<int32_t>(s, {0, 2, 1}, {3});
  Output w = Const<float>(s, {1, 2, 3}, {3});
  // Row 2 (label 1) is ignored.
  NLLLossOptions none{.ignore_index = 1, .reduction = "none"};
  EXPECT_TRUE(TensorNear(RunOne(s, {}, NLLLoss(s, x, labels, w, none)),
                         {0.5f, 4.5f, 0}, {3}));
  NLLLossOptions mean{.ignore_index = 1};
  EXPECT_NEAR(Scalar(s, NLLLoss(s, x, labels, w, mean)), 5.0 / 4, 1e-6);
  NLLLossOptions sum{.ignore_index = 1, .reduction = "sum"};
  EXPECT_NEAR(Scalar(s, NLLLoss(s, x, labels, w, sum)), 5.0, 1e-6);
  // Default ignore_index -100: row 2 counts, weight 2.
  EXPECT_NEAR(Scalar(s, NLLLoss(s, x, labels, w)), 7.0 / 6, 1e-6);
}

TEST(NLLLossTest, GradientAndBadLabel) {
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, {4, 3});
  Output labels = Const<int64_t>(s, {2, 0, 1, 2}, {4});
  Output w = Const<float>(s, {0.5f, 2, 1}, {3});
  for (const char* r : {"mean", "sum", "none"}) {
    auto err = MaxGradientError(
        s, {x}, {RandomTensor({4, 3}, -3, 0, 1)},
        NLLLoss(s, x, labels, w, {.ignore_index = 0, .reduction = r}));
    ASSERT_TRUE(err.ok()) << err.status();
    EXPECT_LT(*err, 1e-3) << r;
  }
  Scope b = Scope::NewRootScope();
  Output bad =
      NLLLoss(b.WithOpName("nll"), Const<float>(b, {-1, -1}, {1, 2}),
              Const<int32_t>(b, {2}, {1}), Const<float>(b, {1, 1}, {2}));
  auto out = RunGraph(b, {}, {bad});
  EXPECT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find(
                "NLLLoss 'nll': label 2 at row 0 is out of range [0, 2) and "
                "is not ignore_index -100"),
            std::string::npos)
      << out.status();
}

TEST(SmoothedCrossEntropyTest, ByHandAndEqualsUnsmoothedAtZero) {
  Scope s = Scope::NewRootScope();
  Output x = Const<float>(s, {1, 2, 3}, {1, 3});
  Output y = Const<int32_t>(s, {0}, {1});
  // q = {0.8, 0.1, 0.1}: logsumexp - sum q x.
  const double lse = 3 + std::log(std::exp(-2.0) + std::exp(-1.0) + 1);
  EXPECT_TRUE(TensorNear(
      RunOne(s, {}, SmoothedSparseSoftmaxCrossEntropy(s, x, y, 0.3f)),
      {static_cast<float>(lse - 1.3)}, {1}));
  const Tensor logits = RandomTensor({5, 7}, -3, 3, 3);
  Output l = Const(s, logits);
  Output labels = Const<int64_t>(s, {0, 6, 3, 3, 1}, {5});
  auto out = RunGraph(s, {},
                      {SmoothedSparseSoftmaxCrossEntropy(s, l, labels, 0),
                       SparseSoftmaxCrossEntropyWithLogits(s, l, labels).loss});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorNear((*out)[0], (*out)[1], 1e-6, 1e-6));
}

TEST(SmoothedCrossEntropyTest, GradientFloat16AndErrors) {
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, {3, 5});
  Output labels = Const<int32_t>(s, {4, 0, 2}, {3});
  auto err =
      MaxGradientError(s, {x}, {RandomTensor({3, 5}, -3, 3, 4)},
                       SmoothedSparseSoftmaxCrossEntropy(s, x, labels, 0.2f));
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LT(*err, 1e-3);
  absl::StatusOr<HalfCheck> c = CompareHalfToFloat(
      [](const Scope& s, const std::vector<Output>& v) {
        return SmoothedSparseSoftmaxCrossEntropy(s, v[0], v[1], 0.1f);
      },
      {RandomTensor({4, 6}, -3, 3, 5),
       Tensor::FromVector<int32_t>({1, 5, 0, 2}, {4})});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->dtype, DType::kFloat16);
  EXPECT_LT(c->forward_error, 2e-3);
  EXPECT_LT(c->gradient_error, 2e-3);
  Scope b = Scope::NewRootScope();
  SmoothedSparseSoftmaxCrossEntropy(b, Const<float>(b, {1, 2}, {1, 2}),
                                    Const<int32_t>(b, {0}, {1}), 1.5f);
  EXPECT_NE(
      b.status().message().find("label_smoothing must be in [0, 1], got 1.5"),
      std::string::npos)
      << b.status();
}

TEST(LossGraphDefTest, RoundTripKeepsAttributesAndValues) {
  Scope s = Scope::NewRootScope();
  Output x = Const(s, RandomTensor({3, 4}, -2, 0, 1));
  Output t = Const(s, RandomTensor({3, 4}, 0.1f, 1, 2));
  Output labels = Const<int32_t>(s, {0, 3, 1}, {3});
  Output w = Const<float>(s, {1, 2, 3, 4}, {4});
  std::vector<Output> ys = {
      MSELoss(s, x, t, {.reduction = "sum"}),
      L1Loss(s, x, t),
      HuberLoss(s, x, t, {.delta = 0.25f}),
      BCEWithLogitsLoss(s, x, t, {.pos_weight = 3}),
      KLDivLoss(s, x, t, {.reduction = "batchmean"}),
      NLLLoss(s, x, labels, w, {.ignore_index = 3}),
      ReduceSum(s, SmoothedSparseSoftmaxCrossEntropy(s, x, labels, 0.25f))};
  std::vector<Output> grads;
  ASSERT_TRUE(AddGradients(s, ys, {x, t}, {}, &grads).ok());
  ys.insert(ys.end(), grads.begin(), grads.end());
  ASSERT_TRUE(s.ok()) << s.status();
  auto def = ToGraphDef(*s.graph());
  ASSERT_TRUE(def.ok()) << def.status();
  Graph back;
  ASSERT_TRUE(ImportGraphDef(*def, &back).ok());
  EXPECT_EQ(back.Fingerprint(), s.graph()->Fingerprint());
  auto before = RunGraph(s, {}, ys);
  ASSERT_TRUE(before.ok()) << before.status();
  Session session(&back);
  std::vector<Output> fetches;
  for (const Output& y : ys) {
    fetches.push_back(Output(back.FindNode(y.node->name()), y.index));
  }
  std::vector<Tensor> after;
  ASSERT_TRUE(session.Run({}, fetches, &after).ok());
  for (size_t i = 0; i < ys.size(); ++i) {
    EXPECT_TRUE(TensorNear(after[i], (*before)[i], 0, 0)) << i;
  }
}

}  // namespace
}  // namespace ipuflow::ops
