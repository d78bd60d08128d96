#include "optimizers/gradient_accumulation.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/session.h"
#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/control/loops.h"
#include "ops/math/mul.h"
#include "ops/math/reduce_sum.h"
#include "ops/state/read_variable.h"
#include "ops/state/variable.h"
#include "optimizers/adam.h"
#include "optimizers/gradient_descent.h"
#include "optimizers/test_util.h"

namespace ipuflow::optimizers {
namespace {

using ::ipuflow::optimizers::testing::LinearLoss;
using ::ipuflow::optimizers::testing::RunSteps;
using ::ipuflow::testing::TensorNear;
using Method = GradientAccumulationReductionMethod;
using Grads = std::vector<std::vector<float>>;

const std::vector<float> kW0 = {1, 2};
// Multiples of 3 times powers of two, exact in float16: sums, g / 3 and
// g * float(1/3) are all exact, so accumulated and reference gradients are
// bit-identical (and so are the weights the same update op makes of them).
const Grads kGrads = {{0.75f, -1.5f}, {3, 0.375f}, {-2.25f, 6},
                      {1.5f, 0.75f},  {-3, 2.25f}, {0.375f, -6}};

// The sum of each group of `n` gradients, each scaled by `scale`.
Grads GroupSums(const Grads& grads, int n, float scale = 1) {
  Grads out;
  for (size_t i = 0; i < grads.size(); ++i) {
    if (i % n == 0) out.push_back(std::vector<float>(grads[i].size(), 0.f));
    for (size_t j = 0; j < grads[i].size(); ++j) {
      out.back()[j] += grads[i][j] * scale;
    }
  }
  return out;
}

// Minimises a LinearLoss (d loss / d w = c) with `opt`, feeding one
// gradient per step; returns w after each step.
std::vector<Tensor> Train(Optimizer& opt, const Grads& grads) {
  Scope s = Scope::NewRootScope();
  LinearLoss l(s, "w", kW0);
  Node* train = opt.Minimize(s, l.loss);
  std::vector<FeedList> feeds;
  for (const auto& g : grads) feeds.push_back(l.Feed(g));
  return RunSteps(s, train, feeds, l.w.value);
}

// Exactly equal.
::testing::AssertionResult Same(const Tensor& a, const Tensor& b) {
  return TensorNear(a, b, /*atol=*/0, /*rtol=*/0);
}

// After steps 1..6 with N = 3: w0, w0, big step 1 (x3), big step 2.
void ExpectTwoBigSteps(const std::vector<Tensor>& w,
                       const std::vector<Tensor>& ref) {
  ASSERT_EQ(w.size(), 6u);
  ASSERT_EQ(ref.size(), 2u);
  const Tensor w0 = Tensor::FromVector<float>(kW0);
  EXPECT_TRUE(Same(w[0], w0));
  EXPECT_TRUE(Same(w[1], w0));
  EXPECT_TRUE(Same(w[2], ref[0]));
  EXPECT_TRUE(Same(w[3], ref[0]));
  EXPECT_TRUE(Same(w[4], ref[0]));
  EXPECT_TRUE(Same(w[5], ref[1]));
}

TEST(GradientAccumulationTest, SumIsOneStepOnTheSummedGradients) {
  GradientDescentOptimizer sgd(0.1f);
  GradientAccumulationOptimizer opt(&sgd, 3);
  EXPECT_EQ(opt.reduction_method(), Method::kSum);
  GradientDescentOptimizer ref_sgd(0.1f);
  ExpectTwoBigSteps(Train(opt, kGrads), Train(ref_sgd, GroupSums(kGrads, 3)));
}

TEST(GradientAccumulationTest, MeanIsOneStepOnTheMeanGradient) {
  GradientDescentOptimizer sgd(0.1f);
  GradientAccumulationOptimizer opt(&sgd, 3, Method::kMean);
  GradientDescentOptimizer ref_sgd(0.1f);
  ExpectTwoBigSteps(Train(opt, kGrads),
                    Train(ref_sgd, GroupSums(kGrads, 3, 1.f / 3)));
}

TEST(GradientAccumulationTest, RunningMeanIsTheMeanUpToRounding) {
  // acc = g1, then (g1 + g2) / 2, then acc * 2/3 + g3 / 3: the last step
  // rounds differently from (g1 + g2 + g3) / 3.
  GradientDescentOptimizer sgd(0.1f);
  GradientAccumulationOptimizer opt(&sgd, 3, Method::kRunningMean);
  GradientDescentOptimizer ref_sgd(0.1f);
  std::vector<Tensor> w = Train(opt, kGrads);
  std::vector<Tensor> ref = Train(ref_sgd, GroupSums(kGrads, 3, 1.f / 3));
  ASSERT_EQ(w.size(), 6u);
  ASSERT_EQ(ref.size(), 2u);
  const Tensor w0 = Tensor::FromVector<float>(kW0);
  EXPECT_TRUE(Same(w[1], w0));
  EXPECT_TRUE(TensorNear(w[2], ref[0], 1e-6, 1e-6));
  EXPECT_TRUE(Same(w[4], w[2]));
  EXPECT_TRUE(TensorNear(w[5], ref[1], 1e-6, 1e-6));
}

TEST(GradientAccumulationTest, OneMiniBatchIsTheInnerOptimizer) {
  for (Method method : {Method::kSum, Method::kMean, Method::kRunningMean}) {
    GradientDescentOptimizer sgd(0.1f);
    GradientAccumulationOptimizer opt(&sgd, 1, method);
    GradientDescentOptimizer ref_sgd(0.1f);
    std::vector<Tensor> w = Train(opt, kGrads);
    std::vector<Tensor> ref = Train(ref_sgd, kGrads);
    ASSERT_EQ(w.size(), ref.size());
    for (size_t i = 0; i < w.size(); ++i) EXPECT_TRUE(Same(w[i], ref[i]));
  }
}

TEST(GradientAccumulationTest, AdamIsAdamOncePerNSteps) {
  AdamOptimizer adam(0.1f);
  GradientAccumulationOptimizer opt(&adam, 3);
  AdamOptimizer ref_adam(0.1f);
  ExpectTwoBigSteps(Train(opt, kGrads), Train(ref_adam, GroupSums(kGrads, 3)));
}

TEST(GradientAccumulationTest, InnerStateChangesOnlyWhenApplied) {
  Scope s = Scope::NewRootScope();
  LinearLoss l(s, "w", kW0);
  AdamOptimizer adam(0.1f);
  Node* train = GradientAccumulationOptimizer(&adam, 3).Minimize(s, l.loss);
  ASSERT_TRUE(s.ok()) << s.status();
  Node* step = s.graph()->FindNode("GradientAccumulation/Adam/step");
  Node* m = s.graph()->FindNode("GradientAccumulation/w/Adam/m");
  ASSERT_TRUE(step != nullptr && m != nullptr);
  std::vector<FeedList> feeds;
  for (const auto& g : kGrads) feeds.push_back(l.Feed(g));
  std::vector<Tensor> steps =
      RunSteps(s, train, feeds, ops::ReadVariable(s, Output(step)));
  ASSERT_EQ(steps.size(), 6u);
  const std::vector<float> expected = {0, 0, 1, 1, 1, 2};
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_TRUE(TensorNear(steps[i], {expected[i]}, {})) << "step " << i;
  }
  // m = (1 - beta1) * (g1 + g2 + g3) after the first update.
  std::vector<Tensor> ms =
      RunSteps(s, train, feeds, ops::ReadVariable(s, Output(m)));
  ASSERT_EQ(ms.size(), 6u);
  EXPECT_TRUE(TensorNear(ms[1], {0, 0}, {2}));
  EXPECT_TRUE(TensorNear(ms[2], {0.15f, 0.4875f}, {2}));
}

TEST(GradientAccumulationTest, AccumulatorCounterAndPlacement) {
  Scope s = Scope::NewRootScope();
  LinearLoss l(s.WithIpu(1), "w", kW0);
  GradientDescentOptimizer sgd(0.1f);
  Node* train = GradientAccumulationOptimizer(&sgd, 3).Minimize(s, l.loss);
  ASSERT_TRUE(s.ok()) << s.status();
  const Graph& g = *s.graph();
  Node* acc = g.FindNode("w/GradientAccumulation/accumulator");
  Node* counter = g.FindNode("GradientAccumulation/counter");
  ASSERT_TRUE(acc != nullptr && counter != nullptr);
  EXPECT_EQ(acc->ipu(), 1);
  EXPECT_EQ(counter->attr<DType>("dtype"), DType::kInt32);
  // w, its accumulator and the counter; only w is trainable.
  EXPECT_EQ(g.collection("variables").size(), 3u);
  EXPECT_EQ(g.collection("trainable_variables").size(), 1u);
  EXPECT_EQ(g.collection("initializers").size(), 3u);
  std::vector<FeedList> feeds;
  for (const auto& grad : kGrads) feeds.push_back(l.Feed(grad));
  std::vector<Tensor> accs =
      RunSteps(s, train, feeds, ops::ReadVariable(s, Output(acc)));
  ASSERT_EQ(accs.size(), 6u);
  EXPECT_TRUE(TensorNear(accs[0], {0.75f, -1.5f}, {2}));
  EXPECT_TRUE(TensorNear(accs[1], {3.75f, -1.125f}, {2}));
  EXPECT_TRUE(TensorNear(accs[2], {0, 0}, {2}));  // Applied and reset.
  EXPECT_TRUE(TensorNear(accs[3], {1.5f, 0.75f}, {2}));
  std::vector<Tensor> ns =
      RunSteps(s, train, feeds, ops::ReadVariable(s, Output(counter)));
  ASSERT_EQ(ns.size(), 6u);
  const std::vector<int32_t> expected = {1, 2, 0, 1, 2, 0};
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(ns[i].scalar<int32_t>(), expected[i]) << "step " << i;
  }
}

TEST(GradientAccumulationTest, Float16Accumulators) {
  GradientDescentOptimizer sgd(0.1f);
  GradientAccumulationOptimizer opt(&sgd, 3, Method::kSum, DType::kFloat16);
  Scope s = Scope::NewRootScope();
  LinearLoss l(s, "w", kW0);
  opt.Minimize(s, l.loss);
  ASSERT_TRUE(s.ok()) << s.status();
  Node* acc = s.graph()->FindNode("GradientAccumulation/w/accumulator");
  ASSERT_NE(acc, nullptr);
  EXPECT_EQ(acc->attr<DType>("dtype"), DType::kFloat16);
  // The gradients and their sums are exact in float16.
  GradientDescentOptimizer ref_sgd(0.1f);
  ExpectTwoBigSteps(Train(opt, kGrads), Train(ref_sgd, GroupSums(kGrads, 3)));
}

// kMean in float32 accumulates with one AssignAddScaled (one pass over
// memory); a float16 accumulator keeps Mul + AssignAdd.
TEST(GradientAccumulationTest, MeanFloat32AccumulatesInOnePass) {
  for (DType dtype : {DType::kFloat32, DType::kFloat16}) {
    GradientDescentOptimizer sgd(0.1f);
    GradientAccumulationOptimizer opt(&sgd, 3, Method::kMean, dtype);
    Scope s = Scope::NewRootScope();
    LinearLoss l(s, "w", kW0);
    opt.Minimize(s, l.loss);
    ASSERT_TRUE(s.ok()) << s.status();
    const Node* acc = s.graph()->FindNode("GradientAccumulation/w/accumulate");
    ASSERT_NE(acc, nullptr);
    const bool fused = dtype == DType::kFloat32;
    EXPECT_EQ(acc->op(), fused ? "AssignAddScaled" : "AssignAdd");
    EXPECT_EQ(
        s.graph()->FindNode("GradientAccumulation/w/scaled_grad") != nullptr,
        !fused);
  }
}

// The fused step is bitwise the unfused one on gradients that round (the
// kGrads above are exact, so they could not tell).
TEST(GradientAccumulationTest, FusedMeanStepIsBitwiseTheUnfusedOne) {
  const TensorShape shape({97, 13});
  Scope s = Scope::NewRootScope();
  std::vector<Output> accs;
  std::vector<Node*> steps;
  Output grad = ops::Placeholder(s.WithOpName("grad"), DType::kFloat32, shape);
  const Tensor init = ::ipuflow::testing::RandomTensor(shape, -1, 1, 99);
  for (bool fuse : {true, false}) {
    Output acc = ops::Variable(s.WithOpName(fuse ? "fused" : "unfused"),
                               ops::Const(s, init))
                     .handle;
    Node* step = AccumulateGradient(
        s.WithOpName(fuse ? "a" : "b"), acc, DType::kFloat32, grad,
        {Output(), ops::Const(s, 1.0f / 3), /*grad_scale_at_most_one=*/fuse});
    ASSERT_NE(step, nullptr);
    EXPECT_EQ(step->op(), fuse ? "AssignAddScaled" : "AssignAdd");
    accs.push_back(ops::ReadVariable(s, acc));
    steps.push_back(step);
  }
  ASSERT_TRUE(s.ok()) << s.status();
  Session session(s.graph());
  ASSERT_TRUE(session.Initialize().ok());
  for (int i = 0; i < 4; ++i) {
    const Tensor g = ::ipuflow::testing::RandomTensor(shape, -7, 7, 100 + i);
    ASSERT_TRUE(session.Run({{grad, g}}, {}, steps, nullptr).ok());
  }
  std::vector<Tensor> out;
  ASSERT_TRUE(session.Run({}, accs, &out).ok());
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(
      std::memcmp(out[0].raw_data(), out[1].raw_data(), out[0].TotalBytes()),
      0);
}

// The one formula (the table in gradient_accumulation.h), evaluated for
// each micro-batch index as the wrapper and a pipeline's backward program
// compute it; with first_overwrites micro-batch 0 discards the accumulator.
TEST(GradientAccumulationTest, MicroBatchScalesAreTheTableFormula) {
  constexpr int kNum = 4;
  for (Method method : {Method::kSum, Method::kMean, Method::kRunningMean}) {
    for (bool first_overwrites : {false, true}) {
      Scope s = Scope::NewRootScope();
      Output n = ops::Placeholder(s.WithOpName("n"), DType::kInt32, {});
      const MicroBatchScales step =
          MakeMicroBatchScales(s, method, n, first_overwrites);
      const AccumulationScales scales =
          ReductionScales(s, method, kNum, step, DType::kFloat32);
      ASSERT_TRUE(s.ok()) << s.status();
      EXPECT_TRUE(scales.grad_scale_at_most_one);
      Session session(s.graph());
      for (int m = 0; m < kNum; ++m) {
        SCOPED_TRACE(absl::StrCat("method ", static_cast<int>(method),
                                  ", first_overwrites ", first_overwrites,
                                  ", n ", m));
        float a = 1, b = 1;
        if (method == Method::kMean) b = 1.0f / kNum;
        if (method == Method::kRunningMean) {
          a = static_cast<float>(m) / (m + 1);
          b = 1.0f / (m + 1);
        }
        if (first_overwrites && m == 0) a = 0;
        std::vector<Output> fetches;
        for (Output o : {scales.accum_scale, scales.grad_scale}) {
          if (o.valid()) fetches.push_back(o);
        }
        std::vector<Tensor> out;
        ASSERT_TRUE(
            session.Run({{n, Tensor::Scalar<int32_t>(m)}}, fetches, &out).ok());
        size_t i = 0;
        const float got_a =
            scales.accum_scale.valid() ? out[i++].scalar<float>() : 1.0f;
        const float got_b =
            scales.grad_scale.valid() ? out[i++].scalar<float>() : 1.0f;
        EXPECT_EQ(got_a, a);  // Bitwise: what the old fed scales were.
        EXPECT_EQ(got_b, b);
      }
    }
  }
}

TEST(GradientAccumulationTest, LossFetchedWithTheStepSeesTheOldWeights) {
  // The update runs after the loss it is derived from, even when nodes run
  // in parallel: loss_k = sum(w_{k-1} * c_k).
  Scope s = Scope::NewRootScope();
  LinearLoss l(s, "w", kW0);
  GradientDescentOptimizer sgd(0.1f);
  Node* train = GradientAccumulationOptimizer(&sgd, 3).Minimize(s, l.loss);
  ASSERT_TRUE(s.ok()) << s.status();
  SessionOptions options;
  options.inter_op_threads = 2;
  Session session(s.graph(), options);
  ASSERT_TRUE(session.Initialize().ok());
  std::vector<Tensor> out;
  std::vector<float> losses;
  for (const auto& g : kGrads) {
    absl::Status status = session.Run(l.Feed(g), {l.loss}, {train}, &out);
    ASSERT_TRUE(status.ok()) << status;
    losses.push_back(out[0].scalar<float>());
  }
  // w = [1, 2] for steps 1-3, then [1 - 0.15, 2 - 0.4875].
  EXPECT_FLOAT_EQ(losses[2], -2.25f + 12);
  EXPECT_FLOAT_EQ(losses[3], 0.85f * 1.5f + 1.5125f * 0.75f);
}

// Disabled until ops/control/loops.cc stops running the stateful nodes of a
// loop nested in a body (here the inner update, in the conditional's
// WhileLoop) as targets of the outer body too: the inner update then runs
// every iteration, so this trains like plain SGD.
TEST(GradientAccumulationTest, WorksInsideADeviceLoop) {
  // The whole training step is a loops::Repeat body, run 6 times in one
  // session run; the gradient doubles and changes sign each iteration.
  Scope s = Scope::NewRootScope();
  ops::VariableHandle w =
      ops::Variable(s.WithOpName("w"), ops::Const<float>(s, kW0, {2}));
  GradientDescentOptimizer sgd(0.1f);
  GradientAccumulationOptimizer opt(&sgd, 3);
  absl::StatusOr<loops::Loop> loop = loops::Repeat(
      s, 6,
      [&](const Scope& b, const std::vector<Output>& args) {
        Output loss = ops::ReduceSum(
            b, ops::Mul(b, ops::ReadVariable(b, w.handle), args[0]));
        opt.Minimize(b, loss);
        return std::vector<Output>{ops::Mul(b, args[0], ops::Const(b, -2.f))};
      },
      {ops::Const<float>(s, {0.75f, -1.5f}, {2})});
  ASSERT_TRUE(loop.ok()) << loop.status();
  Session session(s.graph());
  ASSERT_TRUE(session.Initialize().ok());
  std::vector<Tensor> out;
  ASSERT_TRUE(session.Run({}, {}, {loop->op}, nullptr).ok());
  ASSERT_TRUE(session.Run({}, {w.value}, &out).ok());
  Grads grads = {{0.75f, -1.5f}};
  for (int i = 1; i < 6; ++i)
    grads.push_back({-2 * grads.back()[0], -2 * grads.back()[1]});
  GradientDescentOptimizer ref_sgd(0.1f);
  std::vector<Tensor> ref = Train(ref_sgd, GroupSums(grads, 3));
  ASSERT_EQ(ref.size(), 2u);
  EXPECT_TRUE(Same(out[0], ref[1]));
}

TEST(GradientAccumulationTest, OnlyTheWrapperAccumulates) {
  GradientDescentOptimizer sgd(0.1f);
  GradientAccumulationOptimizer opt(&sgd, 2);
  EXPECT_TRUE(opt.accumulates_gradients());
  EXPECT_FALSE(sgd.accumulates_gradients());
  EXPECT_EQ(opt.name(), "GradientAccumulation");
  EXPECT_EQ(opt.num_mini_batches(), 2);
}

// The status `opt.Minimize` records on a LinearLoss.
absl::Status MinimizeStatus(Optimizer& opt) {
  Scope s = Scope::NewRootScope();
  LinearLoss l(s, "w", kW0);
  EXPECT_EQ(opt.Minimize(s, l.loss), nullptr);
  return s.status();
}

TEST(GradientAccumulationTest, InvalidArguments) {
  GradientDescentOptimizer sgd(0.1f);
  for (int n : {0, -2}) {
    GradientAccumulationOptimizer opt(&sgd, n);
    absl::Status st = MinimizeStatus(opt);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(st.message().find(absl::StrCat(
                  "GradientAccumulation optimizer: num_mini_batches (the "
                  "mini-batches accumulated per weight update) must be >= 1, "
                  "got ",
                  n)),
              std::string::npos)
        << st;
  }
  GradientAccumulationOptimizer ints(&sgd, 2, Method::kSum, DType::kInt32);
  absl::Status st = MinimizeStatus(ints);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("dtype must be float32 or float16, got int32"),
            std::string::npos)
      << st;
  GradientAccumulationOptimizer inner(&sgd, 2);
  GradientAccumulationOptimizer twice(&inner, 3);
  st = MinimizeStatus(twice);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("already accumulates gradients"),
            std::string::npos)
      << st;
  GradientAccumulationOptimizer null(nullptr, 2);
  st = MinimizeStatus(null);
  EXPECT_NE(st.message().find("the optimizer to wrap is null"),
            std::string::npos)
      << st;
}

}  // namespace
}  // namespace ipuflow::optimizers
