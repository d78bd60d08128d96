// CTCLoss against an independent definition: the brute-force sum over every
// path of length T over C classes that collapses to the target, and its
// finite differences (in double) for the gradient.
#include "ops/nn/ctc_loss.h"

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/gradients.h"
#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/nn/log_softmax.h"
#include "ops/testing/half_check.h"

namespace ipuflow::ops {
namespace {

using ::ipuflow::testing::CompareHalfToFloat;
using ::ipuflow::testing::HalfCheck;

using ::ipuflow::testing::GradientCheckOptions;
using ::ipuflow::testing::MaxGradientError;
using ::ipuflow::testing::RandomTensor;
using ::ipuflow::testing::RunGraph;
using ::ipuflow::testing::TensorNear;

constexpr double kInf = std::numeric_limits<double>::infinity();

// A CTC problem held in double so the reference can differentiate it.
struct Problem {
  int64_t time = 0, batch = 0, classes = 0, blank = 0;
  std::vector<double> log_probs;  // [T, N, C].
  std::vector<std::vector<int64_t>> targets;
  std::vector<int64_t> input_lengths;

  double& lp(int64_t t, int64_t n, int64_t c) {
    return log_probs[(t * batch + n) * classes + c];
  }
  double lp(int64_t t, int64_t n, int64_t c) const {
    return log_probs[(t * batch + n) * classes + c];
  }
  Tensor LogProbs() const {
    std::vector<float> v(log_probs.begin(), log_probs.end());
    return Tensor::FromVector<float>(v, {time, batch, classes});
  }
  Tensor Lengths(const std::vector<int64_t>& v, DType dtype) const {
    Tensor t(dtype, {batch});
    for (int64_t n = 0; n < batch; ++n) {
      if (dtype == DType::kInt32)
        t.data<int32_t>()[n] = v[n];
      else
        t.data<int64_t>()[n] = v[n];
    }
    return t;
  }
  std::vector<int64_t> TargetLengths() const {
    std::vector<int64_t> l;
    for (const auto& t : targets) l.push_back(t.size());
    return l;
  }
  // Padded [N, S] with junk past each target (it must be ignored), or 1-D.
  Tensor Targets(DType dtype, bool padded) const {
    std::vector<int64_t> flat;
    int64_t width = 1;
    for (const auto& t : targets) width = std::max<int64_t>(width, t.size());
    for (const auto& t : targets) {
      flat.insert(flat.end(), t.begin(), t.end());
      if (padded) flat.resize(flat.size() + width - t.size(), -7);
    }
    const TensorShape shape =
        padded ? TensorShape({batch, width})
               : TensorShape({static_cast<int64_t>(flat.size())});
    Tensor out(dtype, shape);
    for (size_t i = 0; i < flat.size(); ++i) {
      if (dtype == DType::kInt32)
        out.data<int32_t>()[i] = flat[i];
      else
        out.data<int64_t>()[i] = flat[i];
    }
    return out;
  }
};

// -log of the summed probability of every path of length input_lengths[n]
// over the classes that gives the target once repeats are merged and blanks
// removed: the definition of CTC, without the recurrences. +inf if none.
double BruteForceNll(const Problem& p, int64_t n) {
  const int64_t time = p.input_lengths[n];
  int64_t paths = 1;
  for (int64_t t = 0; t < time; ++t) paths *= p.classes;
  double sum = 0;
  std::vector<int64_t> path(time);
  for (int64_t k = 0; k < paths; ++k) {
    int64_t rest = k;
    double log_prob = 0;
    for (int64_t t = 0; t < time; ++t) {
      path[t] = rest % p.classes;
      rest /= p.classes;
      log_prob += p.lp(t, n, path[t]);
    }
    std::vector<int64_t> collapsed;
    for (int64_t t = 0; t < time; ++t) {
      if (path[t] != p.blank && (t == 0 || path[t] != path[t - 1])) {
        collapsed.push_back(path[t]);
      }
    }
    if (collapsed == p.targets[n]) sum += std::exp(log_prob);
  }
  return sum == 0 ? kInf : -std::log(sum);
}

// The reference loss, reduced like the op (zero_infinity on), projected on
// `weights` (one per output element).
double ReferenceLoss(const Problem& p, LossReduction reduction,
                     const std::vector<double>& weights) {
  double total = 0;
  for (int64_t n = 0; n < p.batch; ++n) {
    double nll = BruteForceNll(p, n);
    if (std::isinf(nll)) nll = 0;
    switch (reduction) {
      case LossReduction::kNone:
        total += weights[n] * nll;
        break;
      case LossReduction::kSum:
        total += weights[0] * nll;
        break;
      case LossReduction::kMean:
        total += weights[0] * nll / std::max<size_t>(p.targets[n].size(), 1) /
                 p.batch;
        break;
    }
  }
  return total;
}

// Log-probabilities: log_softmax of random numbers, or (normalised = false)
// arbitrary numbers in [-3, 0], as any producer could give. Targets of up to
// 3 labels, often repeating, and input lengths in [0, T].
Problem RandomProblem(uint32_t seed, int64_t time, int64_t batch,
                      int64_t classes, int64_t blank, bool normalised) {
  std::mt19937 rng(seed);
  Problem p{time, batch, classes, blank};
  std::uniform_real_distribution<double> u(-3, normalised ? 3 : 0);
  p.log_probs.resize(time * batch * classes);
  for (double& v : p.log_probs) v = u(rng);
  if (normalised) {
    for (int64_t t = 0; t < time; ++t) {
      for (int64_t n = 0; n < batch; ++n) {
        double z = 0;
        for (int64_t c = 0; c < classes; ++c) z += std::exp(p.lp(t, n, c));
        for (int64_t c = 0; c < classes; ++c) p.lp(t, n, c) -= std::log(z);
      }
    }
  }
  auto pick = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  for (int64_t n = 0; n < batch; ++n) {
    std::vector<int64_t> target(pick(0, std::min<int64_t>(3, time)));
    for (size_t j = 0; j < target.size(); ++j) {
      do {
        target[j] =
            j > 0 && pick(0, 2) == 0 ? target[j - 1] : pick(0, classes - 1);
      } while (target[j] == blank);
    }
    p.targets.push_back(target);
    p.input_lengths.push_back(pick(0, 3) == 0 ? pick(0, time) : time);
  }
  return p;
}

struct Built {
  Output log_probs;  // A placeholder.
  Output loss;
};

Built Build(const Scope& s, const Problem& p, CTCLossOptions options,
            bool padded = true, DType int_type = DType::kInt32) {
  Output lp = Placeholder(s, DType::kFloat32, {p.time, p.batch, p.classes});
  Output loss =
      CTCLoss(s.WithOpName("ctc"), lp, Const(s, p.Targets(int_type, padded)),
              Const(s, p.Lengths(p.input_lengths, int_type)),
              Const(s, p.Lengths(p.TargetLengths(), int_type)), options);
  return {lp, loss};
}

absl::StatusOr<Tensor> RunLoss(const Problem& p, CTCLossOptions options,
                               bool padded = true,
                               DType int_type = DType::kInt32) {
  Scope s = Scope::NewRootScope();
  Built b = Build(s, p, options, padded, int_type);
  ASSIGN_OR_RETURN(auto out,
                   RunGraph(s, {{b.log_probs, p.LogProbs()}}, {b.loss}));
  return out[0];
}

void ExpectLossesMatchBruteForce(const Problem& p, const Tensor& loss) {
  ASSERT_EQ(loss.shape(), TensorShape({p.batch}));
  for (int64_t n = 0; n < p.batch; ++n) {
    const double want = BruteForceNll(p, n);
    const double got = loss.data<float>()[n];
    if (std::isinf(want)) {
      EXPECT_EQ(got, kInf) << "sample " << n;
    } else {
      EXPECT_NEAR(got, want, 2e-6 * std::max(1.0, std::abs(want)))
          << "sample " << n << " (input length " << p.input_lengths[n] << ", "
          << p.targets[n].size() << " labels)";
    }
  }
}

TEST(CTCLossTest, MatchesBruteForceEnumeration) {
  uint32_t seed = 1;
  for (int64_t time = 1; time <= 5; ++time) {
    for (int64_t classes = 2; classes <= 4; ++classes) {
      for (bool normalised : {true, false}) {
        // Blank first, and (for C > 2) last.
        const int64_t blank = seed % 2 == 0 ? 0 : classes - 1;
        Problem p = RandomProblem(seed++, time, 4, classes, blank, normalised);
        auto loss = RunLoss(p, {blank, LossReduction::kNone});
        ASSERT_TRUE(loss.ok()) << loss.status();
        SCOPED_TRACE(absl::StrCat("T=", time, " C=", classes, " blank=", blank,
                                  " normalised=", normalised));
        ExpectLossesMatchBruteForce(p, *loss);
      }
    }
  }
}

TEST(CTCLossTest, RepeatedLabelsNeedABlankBetweenThem) {
  // Target [1, 1] fits in T=3 only as (1, blank, 1); T=2 is too short
  // although it has as many steps as labels.
  Problem p = RandomProblem(3, 3, 2, 3, 0, /*normalised=*/false);
  p.targets = {{1, 1}, {1, 1}};
  p.input_lengths = {3, 2};
  auto loss = RunLoss(p, {0, LossReduction::kNone});
  ASSERT_TRUE(loss.ok()) << loss.status();
  EXPECT_NEAR(loss->data<float>()[0],
              -(p.lp(0, 0, 1) + p.lp(1, 0, 0) + p.lp(2, 0, 1)), 1e-5);
  EXPECT_EQ(loss->data<float>()[1], kInf);
  ExpectLossesMatchBruteForce(p, *loss);
}

TEST(CTCLossTest, EmptyTargetIsAllBlanks) {
  Problem p = RandomProblem(4, 4, 3, 3, 2, /*normalised=*/false);
  p.targets = {{}, {}, {}};
  p.input_lengths = {4, 1, 0};
  auto loss = RunLoss(p, {2, LossReduction::kNone});
  ASSERT_TRUE(loss.ok()) << loss.status();
  EXPECT_NEAR(loss->data<float>()[0],
              -(p.lp(0, 0, 2) + p.lp(1, 0, 2) + p.lp(2, 0, 2) + p.lp(3, 0, 2)),
              1e-5);
  EXPECT_NEAR(loss->data<float>()[1], -p.lp(0, 1, 2), 1e-6);
  EXPECT_EQ(loss->data<float>()[2], 0.0f);  // No input, nothing to emit.
  ExpectLossesMatchBruteForce(p, *loss);
}

TEST(CTCLossTest, InputTooShortIsInfiniteOrZeroWithZeroInfinity) {
  Problem p = RandomProblem(5, 3, 3, 4, 0, /*normalised=*/true);
  p.targets = {{1, 2}, {1, 2, 3}, {2}};
  p.input_lengths = {3, 2, 0};  // Samples 1 and 2 cannot be aligned.
  for (bool zero_infinity : {false, true}) {
    Scope s = Scope::NewRootScope();
    Built b = Build(s, p, {0, LossReduction::kNone, zero_infinity});
    std::vector<Output> grads;
    ASSERT_TRUE(AddGradients(s, {b.loss}, {b.log_probs}, {}, &grads).ok());
    auto out = RunGraph(s, {{b.log_probs, p.LogProbs()}}, {b.loss, grads[0]});
    ASSERT_TRUE(out.ok()) << out.status();
    const float* loss = (*out)[0].data<float>();
    EXPECT_NEAR(loss[0], BruteForceNll(p, 0), 1e-5);
    const float bad = zero_infinity ? 0.0f : static_cast<float>(kInf);
    EXPECT_EQ(loss[1], bad);
    EXPECT_EQ(loss[2], bad);
    // Sample 1's gradient is NaN (the loss is +inf) or 0 for t < 2; sample
    // 0's is finite.
    const Tensor& g = (*out)[1];
    for (int64_t t = 0; t < 3; ++t) {
      for (int64_t c = 0; c < 4; ++c) {
        const float g0 = g.data<float>()[(t * 3 + 0) * 4 + c];
        const float g1 = g.data<float>()[(t * 3 + 1) * 4 + c];
        const float g2 = g.data<float>()[(t * 3 + 2) * 4 + c];
        EXPECT_TRUE(std::isfinite(g0));
        if (zero_infinity || t >= 2) {
          EXPECT_EQ(g1, 0.0f) << "t=" << t << " c=" << c;
        } else {
          EXPECT_TRUE(std::isnan(g1)) << "t=" << t << " c=" << c;
        }
        EXPECT_EQ(g2, 0.0f);  // Input length 0.
      }
    }
  }
}

// Issue 22: a NaN among a sample's log-probabilities (t < its input length)
// makes its loss and its gradient NaN, with or without zero_infinity (which
// zeroes infinite losses only); the other samples are unaffected. Before,
// LogAdd dropped a NaN second argument and the loss came out +inf (0 with
// zero_infinity).
TEST(CTCLossTest, NaNStaysNaNEvenWithZeroInfinity) {
  Problem p = RandomProblem(7, 4, 3, 4, 0, /*normalised=*/true);
  p.targets = {{1, 2}, {3}, {2}};
  p.input_lengths = {4, 4, 4};
  p.lp(2, 0, 1) = std::nan("");  // A label of sample 0.
  for (int64_t t = 0; t < 4; ++t) {
    for (int64_t c = 0; c < 4; ++c) p.lp(t, 1, c) = std::nan("");
  }
  for (bool zero_infinity : {false, true}) {
    Scope s = Scope::NewRootScope();
    Built b = Build(s, p, {0, LossReduction::kNone, zero_infinity});
    std::vector<Output> grads;
    ASSERT_TRUE(AddGradients(s, {b.loss}, {b.log_probs}, {}, &grads).ok());
    auto out = RunGraph(s, {{b.log_probs, p.LogProbs()}}, {b.loss, grads[0]});
    ASSERT_TRUE(out.ok()) << out.status();
    const float* loss = (*out)[0].data<float>();
    EXPECT_TRUE(std::isnan(loss[0])) << loss[0];
    EXPECT_TRUE(std::isnan(loss[1])) << loss[1];
    EXPECT_NEAR(loss[2], BruteForceNll(p, 2), 1e-5);
    const float* g = (*out)[1].data<float>();
    for (int64_t t = 0; t < 4; ++t) {
      for (int64_t c = 0; c < 4; ++c) {
        EXPECT_TRUE(std::isnan(g[(t * 3 + 0) * 4 + c])) << t << " " << c;
        EXPECT_TRUE(std::isnan(g[(t * 3 + 1) * 4 + c])) << t << " " << c;
        EXPECT_TRUE(std::isfinite(g[(t * 3 + 2) * 4 + c])) << t << " " << c;
      }
    }
    // Reduced, the NaN reaches the sum and the mean.
    for (LossReduction r : {LossReduction::kSum, LossReduction::kMean}) {
      auto reduced = RunLoss(p, {0, r, zero_infinity});
      ASSERT_TRUE(reduced.ok()) << reduced.status();
      EXPECT_TRUE(std::isnan(reduced->data<float>()[0]));
    }
  }
}

TEST(CTCLossTest, SumAndMeanReductions) {
  Problem p = RandomProblem(6, 5, 4, 4, 0, /*normalised=*/true);
  p.targets = {{1, 2, 1}, {}, {3}, {2, 2}};
  p.input_lengths = {5, 3, 4, 5};
  auto none = RunLoss(p, {0, LossReduction::kNone});
  auto sum = RunLoss(p, {0, LossReduction::kSum});
  auto mean = RunLoss(p, {0, LossReduction::kMean});
  ASSERT_TRUE(none.ok() && sum.ok() && mean.ok());
  ExpectLossesMatchBruteForce(p, *none);
  const float* l = none->data<float>();
  EXPECT_EQ(sum->shape(), TensorShape());
  EXPECT_EQ(mean->shape(), TensorShape());
  EXPECT_NEAR(sum->scalar<float>(), l[0] + l[1] + l[2] + l[3], 1e-4);
  // The empty target divides by max(0, 1) = 1.
  EXPECT_NEAR(mean->scalar<float>(),
              (l[0] / 3 + l[1] / 1 + l[2] / 1 + l[3] / 2) / 4, 1e-5);
}

TEST(CTCLossTest, ConcatenatedTargetsAndInt64EqualPaddedInt32) {
  Problem p = RandomProblem(7, 5, 4, 4, 0, /*normalised=*/true);
  p.targets = {{1, 2, 1}, {}, {3}, {2, 2}};
  auto want = RunLoss(p, {0, LossReduction::kNone});
  ASSERT_TRUE(want.ok()) << want.status();
  for (bool padded : {true, false}) {
    for (DType dt : {DType::kInt32, DType::kInt64}) {
      auto got = RunLoss(p, {0, LossReduction::kNone}, padded, dt);
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_TRUE(TensorNear(*got, *want, 0, 0))
          << (padded ? "padded " : "1-D ") << DTypeName(dt);
    }
  }
}

TEST(CTCLossTest, EmptyBatch) {
  Problem p{5, 0, 4, 0};
  auto none = RunLoss(p, {0, LossReduction::kNone});
  auto mean = RunLoss(p, {0, LossReduction::kMean});
  ASSERT_TRUE(none.ok() && mean.ok());
  EXPECT_EQ(none->shape(), TensorShape({0}));
  EXPECT_EQ(mean->scalar<float>(), 0.0f);  // Not 0 / 0.
}

// d(sum(r * loss))/d(log_probs) from AddGradients against central finite
// differences of the brute-force reference in double, on log-probabilities
// that are not normalised: the gradient must hold for any producer.
TEST(CTCLossTest, GradientMatchesFiniteDifferencesOfBruteForce) {
  uint32_t seed = 20;
  for (LossReduction reduction :
       {LossReduction::kNone, LossReduction::kSum, LossReduction::kMean}) {
    for (bool normalised : {false, true}) {
      const int64_t blank = seed % 3;
      Problem p = RandomProblem(seed++, 4, 3, 3, blank, normalised);
      Scope s = Scope::NewRootScope();
      Built b = Build(s, p, {p.blank, reduction, /*zero_infinity=*/true});
      const Tensor r = RandomTensor(b.loss.shape(), -1, 1, seed);
      std::vector<Output> grads;
      ASSERT_TRUE(
          AddGradients(s, {b.loss}, {b.log_probs}, {Const(s, r)}, &grads).ok())
          << s.status();
      auto out = RunGraph(s, {{b.log_probs, p.LogProbs()}}, {grads[0]});
      ASSERT_TRUE(out.ok()) << out.status();
      const std::vector<double> weights(r.data<float>(),
                                        r.data<float>() + r.NumElements());
      std::vector<float> numeric;
      for (double& v : p.log_probs) {
        const double orig = v, h = 1e-5;
        v = orig + h;
        const double plus = ReferenceLoss(p, reduction, weights);
        v = orig - h;
        const double minus = ReferenceLoss(p, reduction, weights);
        v = orig;
        numeric.push_back((plus - minus) / (2 * h));
      }
      EXPECT_TRUE(TensorNear((*out)[0], numeric, {p.time, p.batch, p.classes},
                             2e-5, 1e-4))
          << "reduction " << static_cast<int>(reduction) << " normalised "
          << normalised;
    }
  }
}

// The project's checker (finite differences of the op itself) on a problem
// too large to enumerate, for each reduction, directly and through
// LogSoftmax.
TEST(CTCLossTest, GradientCheckerOnLargerProblems) {
  Problem p = RandomProblem(30, 9, 3, 5, 0, /*normalised=*/false);
  p.targets = {{1, 1, 2, 4}, {3}, {2, 4, 4, 4}};
  p.input_lengths = {9, 6, 8};
  GradientCheckOptions fd;
  fd.delta = 1e-2;  // The loss is float32: a larger step, smaller rounding.
  for (LossReduction reduction :
       {LossReduction::kNone, LossReduction::kSum, LossReduction::kMean}) {
    Scope s = Scope::NewRootScope();
    Built b = Build(s, p, {0, reduction});
    auto err = MaxGradientError(s, {b.log_probs}, {p.LogProbs()}, b.loss, fd);
    ASSERT_TRUE(err.ok()) << err.status();
    EXPECT_LT(*err, 2e-3) << "reduction " << static_cast<int>(reduction);

    Scope s2 = Scope::NewRootScope();
    Output logits = Placeholder(s2, DType::kFloat32, {p.time, p.batch, 5});
    Output loss = CTCLoss(
        s2, LogSoftmax(s2, logits), Const(s2, p.Targets(DType::kInt32, true)),
        Const(s2, p.Lengths(p.input_lengths, DType::kInt32)),
        Const(s2, p.Lengths(p.TargetLengths(), DType::kInt32)), {0, reduction});
    err = MaxGradientError(s2, {logits}, {p.LogProbs()}, loss, fd);
    ASSERT_TRUE(err.ok()) << err.status();
    EXPECT_LT(*err, 2e-3) << "through LogSoftmax, reduction "
                          << static_cast<int>(reduction);
  }
}

// d nll / d y_t(c) is minus the posterior of c at t, so each step's gradient
// sums to -1 whatever the log_probs; PyTorch's logits-gradient formula
// (exp(y) minus it) would sum to sum(exp(y)) - 1 instead.
TEST(CTCLossTest, GradientIsMinusThePosteriorForAnyProducer) {
  Problem p = RandomProblem(40, 6, 2, 4, 0, /*normalised=*/false);
  p.targets = {{1, 3}, {2, 2}};
  p.input_lengths = {6, 4};
  Scope s = Scope::NewRootScope();
  Built b = Build(s, p, {0, LossReduction::kNone});
  Output g =
      CTCLossGrad(s, b.log_probs, b.loss.node->input(1), b.loss.node->input(2),
                  b.loss.node->input(3), Const<float>(s, {1, 1}, {2}),
                  {0, LossReduction::kNone});
  auto out = RunGraph(s, {{b.log_probs, p.LogProbs()}}, {g});
  ASSERT_TRUE(out.ok()) << out.status();
  for (int64_t t = 0; t < p.time; ++t) {
    for (int64_t n = 0; n < p.batch; ++n) {
      double sum = 0;
      for (int64_t c = 0; c < p.classes; ++c) {
        const float v = (*out)[0].data<float>()[(t * p.batch + n) * 4 + c];
        EXPECT_LE(v, 0.0f);
        sum += v;
      }
      EXPECT_NEAR(sum, t < p.input_lengths[n] ? -1.0 : 0.0, 1e-5)
          << "t=" << t << " n=" << n;
    }
  }
}

TEST(CTCLossTest, SecondDerivativeIsAnError) {
  Problem p = RandomProblem(41, 3, 1, 3, 0, true);
  Scope s = Scope::NewRootScope();
  Built b = Build(s, p, {});
  std::vector<Output> g1, g2;
  ASSERT_TRUE(AddGradients(s, {b.loss}, {b.log_probs}, {}, &g1).ok());
  absl::Status st = AddGradients(s, {g1[0]}, {b.log_probs}, {}, &g2);
  EXPECT_EQ(st.code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(st.message().find("second derivative of CTCLoss"),
            std::string::npos)
      << st;
}

// Runs the op on bad lengths or labels; the error must name the node, the
// sample and what is wrong.
void ExpectRunError(const std::vector<int32_t>& input_lengths,
                    const std::vector<int32_t>& target_lengths,
                    const Tensor& targets, const std::string& needle,
                    int64_t blank = 0) {
  Scope s = Scope::NewRootScope();
  Output il = Placeholder(s, DType::kInt32, {2});
  Output tl = Placeholder(s, DType::kInt32, {2});
  Output tg = Placeholder(s, DType::kInt32, targets.shape());
  Output lp = Const(s, RandomTensor({5, 2, 4}, -2, 0, 1));
  Output loss = CTCLoss(s.WithOpName("ctc"), lp, tg, il, tl, {blank});
  auto out = RunGraph(s,
                      {{il, Tensor::FromVector<int32_t>(input_lengths)},
                       {tl, Tensor::FromVector<int32_t>(target_lengths)},
                       {tg, targets}},
                      {loss});
  ASSERT_FALSE(out.ok()) << needle;
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find("CTCLoss 'ctc': " + needle),
            std::string::npos)
      << out.status();
}

TEST(CTCLossTest, RunTimeErrorsNameTheSample) {
  const Tensor padded = Tensor::FromVector<int32_t>({1, 2, 3, 3, 1, 2}, {2, 3});
  ExpectRunError({5, 6}, {3, 3}, padded,
                 "sample 1: input length 6 is out of range [0, T=5]");
  ExpectRunError({-1, 5}, {3, 3}, padded,
                 "sample 0: input length -1 is out of range [0, T=5]");
  ExpectRunError({5, 5}, {3, 4}, padded,
                 "sample 1: target length 4 is out of range [0, 3] (padded "
                 "targets have shape [2,3])");
  ExpectRunError({5, 5}, {-2, 3}, padded,
                 "sample 0: target length -2 is out of range [0, 3]");
  ExpectRunError(
      {5, 5}, {3, 3}, Tensor::FromVector<int32_t>({1, 2, 3, 3, 0, 2}, {2, 3}),
      "sample 1: label 1 is 0, the blank; targets cannot contain it");
  ExpectRunError({5, 5}, {3, 3},
                 Tensor::FromVector<int32_t>({1, 2, 3, 3, 1, 2}, {2, 3}),
                 "sample 0: label 0 is 1, the blank", /*blank=*/1);
  ExpectRunError({5, 5}, {3, 3},
                 Tensor::FromVector<int32_t>({1, 4, 3, 3, 1, 2}, {2, 3}),
                 "sample 0: label 1 is 4, out of the classes' range [0, 4)");
  ExpectRunError({5, 5}, {1, 3}, Tensor::FromVector<int32_t>({2, 1, -1, 3}),
                 "sample 1: label 1 is -1, out of the classes' range [0, 4)");
  ExpectRunError({5, 5}, {2, 3}, Tensor::FromVector<int32_t>({1, 2, 3, 1}),
                 "the target lengths sum to 5 but the 1-D targets have 4 "
                 "elements");
  ExpectRunError({5, 5}, {2, 5}, Tensor::FromVector<int32_t>({1, 2, 3, 1}),
                 "sample 1: target length 5 is out of range [0, 4] (1-D");
}

TEST(CTCLossTest, ShapesAndBuildTimeErrors) {
  {
    Scope s = Scope::NewRootScope();
    Output lp = Placeholder(s, DType::kFloat32, {7, 3, 5});
    Output tg = Placeholder(s, DType::kInt64, {3, 4});
    Output len = Placeholder(s, DType::kInt32, {3});
    EXPECT_EQ(CTCLoss(s, lp, tg, len, len, {0, LossReduction::kNone}).shape(),
              TensorShape({3}));
    EXPECT_EQ(CTCLoss(s, lp, tg, len, len).shape(), TensorShape());
    EXPECT_EQ(CTCLoss(s, lp, Placeholder(s, DType::kInt32, {-1}), len, len,
                      {4, LossReduction::kSum})
                  .shape(),
              TensorShape());
    ASSERT_TRUE(s.ok()) << s.status();
  }
  struct Case {
    TensorShape lp;
    DType lp_type;
    TensorShape targets;
    DType len_type;
    TensorShape lengths;
    int64_t blank;
    std::string needle;
  };
  const std::vector<Case> cases = {
      {{7, 5},
       DType::kFloat32,
       {3, 4},
       DType::kInt32,
       {3},
       0,
       "input 'log_probs' must have rank 3, got shape [7,5]"},
      {{7, 3, 5},
       DType::kInt32,
       {3, 4},
       DType::kInt32,
       {3},
       0,
       "input 'log_probs' must be float32 or float16, got int32"},
      {{7, 3, 5},
       DType::kFloat32,
       {3, 4, 1},
       DType::kInt32,
       {3},
       0,
       "input 'targets' must be [N, S] (padded) or 1-D (concatenated), got "
       "shape [3,4,1]"},
      {{7, 3, 5},
       DType::kFloat32,
       {3, 4},
       DType::kFloat32,
       {3},
       0,
       "input 'input_lengths' must be int32 or int64, got float32"},
      {{7, 3, 5},
       DType::kFloat32,
       {3, 4},
       DType::kInt32,
       {2},
       0,
       "input 'log_probs' has shape [7,3,5] but input 'input_lengths' has "
       "shape [2]; the batch sizes"},
      {{7, 3, 5},
       DType::kFloat32,
       {4, 4},
       DType::kInt32,
       {3},
       0,
       "input 'log_probs' has shape [7,3,5] but input 'targets' has shape "
       "[4,4]; the batch sizes"},
      {{7, 3, 5},
       DType::kFloat32,
       {3, 4},
       DType::kInt32,
       {3},
       5,
       "blank 5 must be a class in [0, C) with C = 5"},
      {{7, 3, 5},
       DType::kFloat32,
       {3, 4},
       DType::kInt32,
       {3},
       -1,
       "blank -1 must be a class in [0, C) with C = 5"},
  };
  for (const Case& c : cases) {
    Scope s = Scope::NewRootScope();
    CTCLoss(s.WithOpName("ctc"), Placeholder(s, c.lp_type, c.lp),
            Placeholder(s, DType::kInt32, c.targets),
            Placeholder(s, c.len_type, c.lengths),
            Placeholder(s, DType::kInt32, {3}), {c.blank});
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument)
        << c.needle;
    EXPECT_NE(s.status().message().find("CTCLoss 'ctc': " + c.needle),
              std::string::npos)
        << s.status();
  }
  // An unknown reduction (only reachable without the builder).
  Scope s = Scope::NewRootScope();
  Output lp = Placeholder(s, DType::kFloat32, {7, 3, 5});
  Output len = Placeholder(s, DType::kInt32, {3});
  s.WithOpName("ctc").AddNode("CTCLoss", {lp, len, len, len},
                              {{"reduction", "average"}});
  EXPECT_NE(s.status().message().find(
                "attribute 'reduction' must be \"none\", \"sum\" or \"mean\", "
                "got \"average\""),
            std::string::npos)
      << s.status();
}

TEST(CTCLossTest, Float16LossAndGradientMatchFloat32) {
  absl::StatusOr<HalfCheck> c = CompareHalfToFloat(
      [](const Scope& s, const std::vector<Output>& x) {
        return CTCLoss(s, LogSoftmax(s, x[0]), x[1], x[2], x[3]);
      },
      {RandomTensor({8, 2, 5}, -2, 2, 1),
       Tensor::FromVector<int32_t>({1, 2, 3, 4, 2, 0}, {2, 3}),
       Tensor::FromVector<int32_t>({8, 6}),
       Tensor::FromVector<int32_t>({3, 2})});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->dtype, DType::kFloat16);
  EXPECT_LT(c->forward_error, 2e-3);
  EXPECT_LT(c->gradient_error, 2e-3);
}

TEST(CTCLossTest, Float16NoneReductionAndDLossDType) {
  absl::StatusOr<HalfCheck> c = CompareHalfToFloat(
      [](const Scope& s, const std::vector<Output>& x) {
        CTCLossOptions o;
        o.reduction = LossReduction::kNone;
        return CTCLoss(s, LogSoftmax(s, x[0]), x[1], x[2], x[3], o);
      },
      {RandomTensor({6, 3, 4}, -2, 2, 2),
       Tensor::FromVector<int32_t>({1, 2, 3, 1, 3}),
       Tensor::FromVector<int32_t>({6, 5, 4}),
       Tensor::FromVector<int32_t>({2, 2, 1})});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_LT(c->forward_error, 2e-3);
  EXPECT_LT(c->gradient_error, 2e-3);
  Scope s = Scope::NewRootScope();
  CTCLossGrad(
      s.WithOpName("g"), Placeholder(s, DType::kFloat16, {6, 3, 4}),
      Placeholder(s, DType::kInt32, {3, 2}), Placeholder(s, DType::kInt32, {3}),
      Placeholder(s, DType::kInt32, {3}), Placeholder(s, DType::kFloat32, {}));
  EXPECT_NE(s.status().message().find(
                "CTCLossGrad 'g': input 'log_probs' is float16 but input "
                "'dloss' is float32"),
            std::string::npos)
      << s.status();
}

}  // namespace
}  // namespace ipuflow::ops
