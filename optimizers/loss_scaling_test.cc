// LossScalingOptimizer: each rule step by step against hand-worked scales.
// Gradients are crafted through loss = sum(float32(w) * c) with c fed, so
// the float16 gradient of w is float16(S * c).
#include "optimizers/loss_scaling.h"

#include <cmath>
#include <limits>

#include "core/half.h"
#include "core/ipu/ipu_strategy.h"
#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/collective/replica_index.h"
#include "ops/control/loops.h"
#include "ops/math/add.h"
#include "ops/math/cast.h"
#include "ops/math/mul.h"
#include "ops/math/reduce_sum.h"
#include "ops/math/sub.h"
#include "ops/state/read_variable.h"
#include "optimizers/adam.h"
#include "optimizers/gradient_accumulation.h"
#include "optimizers/gradient_descent.h"
#include "optimizers/test_util.h"

namespace ipuflow::optimizers {
namespace {

using ::ipuflow::optimizers::testing::At;

using ::ipuflow::optimizers::testing::LinearLoss;
using ::ipuflow::testing::TensorNear;
using Grads = std::vector<std::vector<float>>;

constexpr float kInf = std::numeric_limits<float>::infinity();

// A variable's value as a fetch built now (after the step's updates).
Output Read(const Scope& s, const std::string& variable) {
  Node* n = s.graph()->FindNode(variable);
  EXPECT_NE(n, nullptr) << variable;
  return ops::ReadVariable(s, Output(n));
}

struct Steps {
  std::vector<float> scales;   // S after each step.
  std::vector<Tensor> values;  // The fetches after each step, flattened.
};

// Minimises sum(float(w) * c) for w = w0 of `dtype` with `opt`, feeding
// grads[i] at step i; after each step fetches S and `fetch_vars`.
Steps Train(LossScalingOptimizer& opt, DType dtype, const Grads& grads,
            const std::vector<std::string>& fetch_vars = {"w"},
            std::vector<float> w0 = {1, 2, 3, 4}) {
  Scope s = Scope::NewRootScope();
  LinearLoss l(s, "w", w0, dtype);
  Node* train = opt.Minimize(s, l.loss);
  EXPECT_TRUE(s.ok()) << s.status();
  Steps run;
  if (!s.ok()) return run;
  std::vector<Output> fetches;
  if (!opt.scale_variable().empty()) {
    fetches.push_back(Read(s, opt.scale_variable()));
  }
  for (const std::string& v : fetch_vars) fetches.push_back(Read(s, v));
  Session session(s.graph());
  absl::Status st = session.Initialize();
  EXPECT_TRUE(st.ok()) << st;
  std::vector<Tensor> out;
  for (const auto& c : grads) {
    st = session.Run(l.Feed(c), {}, {train}, nullptr);
    EXPECT_TRUE(st.ok()) << st;
    st = session.Run({}, fetches, &out);
    EXPECT_TRUE(st.ok()) << st;
    if (!st.ok()) return run;
    size_t k = 0;
    if (!opt.scale_variable().empty()) run.scales.push_back(At(out[k++], 0));
    for (; k < out.size(); ++k) run.values.push_back(out[k]);
  }
  return run;
}

// Exactly equal.
::testing::AssertionResult Same(const Tensor& a, const Tensor& b) {
  return TensorNear(a, b, /*atol=*/0, /*rtol=*/0);
}

const Grads kSmall(3, std::vector<float>{0.75f, -1.5f, 3, 0.375f});

// ---- Static ----

TEST(StaticLossScalingTest, PowerOfTwoIsBitwiseTheUnscaledFloat32Run) {
  const Grads g = {{0.1f, -0.3f, 7, 1e-3f}, {2, 0.5f, -1, 3}, {1e-5f, 4, 4, 4}};
  AdamOptimizer plain_adam(1e-2f), scaled_adam(1e-2f);
  LossScalingOptimizer plain(&plain_adam, LossScaling::Static(1));
  LossScalingOptimizer scaled(&scaled_adam, LossScaling::Static(1024));
  const Steps a =
      Train(plain, DType::kFloat32, g, {"w", "w/Adam/m", "w/Adam/v"});
  const Steps b =
      Train(scaled, DType::kFloat32, g, {"w", "w/Adam/m", "w/Adam/v"});
  ASSERT_EQ(a.values.size(), 9u);
  ASSERT_EQ(b.values.size(), 9u);
  for (size_t i = 0; i < a.values.size(); ++i) {
    EXPECT_TRUE(Same(b.values[i], a.values[i])) << i;
  }
  EXPECT_EQ(scaled.scale_variable(), "");  // A constant.
}

TEST(StaticLossScalingTest, Float16GradientThatUnderflowsSurvivesScaling) {
  // c = 2^-26: float16(c) = 0 (the smallest subnormal is 2^-24), so without
  // scaling w never moves. With S = 2^16 the float16 gradient is 2^-10,
  // unscaled in float32 to 2^-26 for the float32 master: with lr = 2^10 each
  // step subtracts 2^-16, and after 64 steps w = 1 - 2^-10 exactly.
  const Grads g(64, std::vector<float>{std::ldexp(1.f, -26)});
  for (float scale : {1.f, 65536.f}) {
    GradientDescentOptimizer sgd(1024.f);
    sgd.set_master_weights(true);
    LossScalingOptimizer opt(&sgd, LossScaling::Static(scale));
    const Steps r = Train(opt, DType::kFloat16, g, {"w"}, {1});
    ASSERT_EQ(r.values.size(), 64u);
    EXPECT_EQ(At(r.values.back(), 0),
              scale == 1 ? 1.f : 1.f - std::ldexp(1.f, -10))
        << "scale " << scale;
  }
}

// ---- Automatic (PopART's histogram rule) ----

TEST(AutomaticLossScalingTest, DoublesThenHalvesOnALargeGradient) {
  // Edge E = 65504 / 8 = 8188; t = 1e-7, so one upper element among a few
  // lower ones halves S. From S = 1024, float16 gradients S * c:
  //  c = 1 x4:              max 1024 < E             -> S = 2048
  //  c = 1, 1, 1, 4:        2048 * 4 = 8192 >= E     -> S = 1024
  //  c = 1 x4:                                       -> S = 2048
  //  c = 1 x4:                                       -> S = 4096
  //  c = 2 x4:              8192 >= E (all upper)    -> S = 2048
  GradientDescentOptimizer sgd(1e-3f);
  sgd.set_master_weights(true);
  LossScalingOptimizer opt(&sgd, LossScaling::Automatic(1024));
  const Grads g = {
      {1, 1, 1, 1}, {1, 1, 1, 4}, {1, 1, 1, 1}, {1, 1, 1, 1}, {2, 2, 2, 2}};
  const Steps r = Train(opt, DType::kFloat16, g);
  EXPECT_EQ(r.scales, (std::vector<float>{2048, 1024, 2048, 4096, 2048}));
  EXPECT_EQ(opt.scale_variable(), "LossScaling/scale");
}

TEST(AutomaticLossScalingTest, WeightsSeeUnscaledGradients) {
  // SGD lr 2^-4 on masters with c = 1: w = w0 - k/16 whatever S does.
  GradientDescentOptimizer sgd(0.0625f);
  sgd.set_master_weights(true);
  LossScalingOptimizer opt(&sgd, LossScaling::Automatic(4096));
  const Steps r = Train(opt, DType::kFloat16, Grads(4, {1, 1, 1, 1}));
  EXPECT_EQ(r.scales, (std::vector<float>{8192, 4096, 8192, 4096}));
  EXPECT_EQ(At(r.values.back(), 0), 0.75f);
  EXPECT_EQ(At(r.values.back(), 3), 3.75f);
}

TEST(AutomaticLossScalingTest, ThresholdOnTheUpperShare) {
  // t = 0.2: f = 0.25, so S halves when upper > lower / 4.
  AutomaticLossScalingSettings a;
  a.threshold_upper_count_proportion = 0.2f;
  GradientDescentOptimizer sgd(1e-3f);
  sgd.set_master_weights(true);
  LossScalingOptimizer opt(&sgd, LossScaling::Automatic(2048, a));
  // {1,1,1,4}: upper 1 > 0.25 * 3 -> 1024. Then {1,1,1,8} at 1024: 8192,
  // upper 1 -> 512. Then {8,8,8,8} at 512: 4096 < E -> 1024.
  const Steps r =
      Train(opt, DType::kFloat16, {{1, 1, 1, 4}, {1, 1, 1, 8}, {8, 8, 8, 8}});
  EXPECT_EQ(r.scales, (std::vector<float>{1024, 512, 1024}));
}

TEST(AutomaticLossScalingTest, UpdatePeriodUsesTheLastStepOfEachPeriod) {
  // update_period = 2: S changes after steps 2, 4, ... from the statistics of
  // that step (PopART runs the histograms in N of every N x period runs).
  AutomaticLossScalingSettings a;
  a.update_period = 2;
  GradientDescentOptimizer sgd(1e-3f);
  sgd.set_master_weights(true);
  LossScalingOptimizer opt(&sgd, LossScaling::Automatic(2048, a));
  // Step 1 large (ignored), step 2 small -> 4096; step 3 small, step 4
  // large (2 * 4096 = 8192) -> 2048.
  const Steps r =
      Train(opt, DType::kFloat16,
            {{1, 1, 1, 8}, {1, 1, 1, 1}, {1, 1, 1, 1}, {1, 1, 1, 2}});
  EXPECT_EQ(r.scales, (std::vector<float>{2048, 4096, 4096, 2048}));
}

TEST(AutomaticLossScalingTest, StatisticsSummedOverMicroBatches) {
  // N = 2 micro-batches, t = 0.2 (f = 0.25), S = 2048:
  // micro-batch 1 {1,1,1,4}: lower 3, upper 1; micro-batch 2 {1,1,1,1}:
  // lower 4. Summed: 1 > 0.25 * 7 = 1.75 is false -> double (micro-batch 1
  // alone would halve: 1 > 0.75). S only changes with the weight update.
  AutomaticLossScalingSettings a;
  a.threshold_upper_count_proportion = 0.2f;
  GradientDescentOptimizer sgd(1e-3f);
  sgd.set_master_weights(true);
  GradientAccumulationOptimizer ga(
      &sgd, 2, GradientAccumulationReductionMethod::kSum, DType::kFloat32);
  LossScalingOptimizer opt(&ga, LossScaling::Automatic(2048, a));
  const Steps r =
      Train(opt, DType::kFloat16,
            {{1, 1, 1, 4}, {1, 1, 1, 1}, {1, 1, 1, 4}, {1, 1, 1, 4}});
  // Second update: 2 upper of 8 at S = 4096 (4 * 4096 >= E): 2 > 1.5 -> halve.
  EXPECT_EQ(r.scales, (std::vector<float>{2048, 4096, 4096, 2048}));
}

TEST(AutomaticLossScalingTest, StatisticsSummedOverTwoReplicas) {
  // Replica r's gradient is S * c * (1 + (1 - r) * [0, 0, 0, 3]): replica 0
  // gets {1,1,1,4} (upper 1, lower 3), replica 1 {1,1,1,1} (lower 4). With
  // t = 0.2 the sum (1 > 0.25 * 7 false) doubles S on both replicas;
  // replica 0 alone would have halved it.
  Scope s = Scope::NewRootScope();
  ops::VariableHandle w = ops::Variable(
      s.WithOpName("w"),
      ops::Cast(s, ops::Const<float>(s, {1, 2, 3, 4}, {4}), DType::kFloat16));
  Output c = ops::Const<float>(s, {1, 1, 1, 1}, {4});
  Output one_minus_r =
      ops::Sub(s, ops::Const(s, 1.f),
               ops::Cast(s, ops::ReplicaIndex(s), DType::kFloat32));
  Output factor = ops::Add(
      s, ops::Const<float>(s, {1, 1, 1, 1}, {4}),
      ops::Mul(s, ops::Const<float>(s, {0, 0, 0, 3}, {4}), one_minus_r));
  Output loss =
      ops::ReduceSum(s, ops::Mul(s, ops::Cast(s, w.value, DType::kFloat32),
                                 ops::Mul(s, c, factor)));
  AutomaticLossScalingSettings a;
  a.threshold_upper_count_proportion = 0.2f;
  GradientDescentOptimizer sgd(1e-3f);
  sgd.set_master_weights(true);
  LossScalingOptimizer opt(&sgd, LossScaling::Automatic(2048, a));
  Node* train = opt.Minimize(s, loss);
  ASSERT_TRUE(s.ok()) << s.status();
  IPUConfig config;
  config.set_auto_select_ipus(2);
  auto system = IPUSystem::Create(config);
  ASSERT_TRUE(system.ok()) << system.status();
  IPUStrategy strategy(system->get());
  ASSERT_TRUE(strategy.Initialize(*s.graph()).ok());
  auto r = strategy.Run(*s.graph(), {}, {train}, {});
  ASSERT_TRUE(r.ok()) << r.status();
  auto scale = strategy.Run(*s.graph(), {Read(s, opt.scale_variable())});
  ASSERT_TRUE(scale.ok()) << scale.status();
  EXPECT_TRUE(TensorNear((*scale)[0], {4096, 4096}, {2}, 0, 0));
}

TEST(AutomaticLossScalingTest, NoFloat16GradientIsTheOriginalsError) {
  Scope s = Scope::NewRootScope();
  LinearLoss l(s, "w", {1, 2});
  GradientDescentOptimizer sgd(0.1f);
  LossScalingOptimizer opt(&sgd, LossScaling::Automatic());
  EXPECT_EQ(opt.Minimize(s, l.loss), nullptr);
  EXPECT_EQ(s.status().message(),
            "[AutomaticLossScale transform] No tracked gradient tensors of "
            "type fp16 were found.");
}

TEST(AutomaticLossScalingTest, SettingsOutOfRange) {
  for (int which = 0; which < 3; ++which) {
    AutomaticLossScalingSettings a;
    if (which == 0) a.bin_edge_location = 2;
    if (which == 1) a.threshold_upper_count_proportion = -0.5f;
    if (which == 2) a.update_period = 0;
    Scope s = Scope::NewRootScope();
    LinearLoss l(s, "w", {1, 2}, DType::kFloat16);
    GradientDescentOptimizer sgd(0.1f);
    LossScalingOptimizer opt(&sgd, LossScaling::Automatic(1, a));
    EXPECT_EQ(opt.Minimize(s, l.loss), nullptr);
    const std::string expected[] = {
        "[AutomaticLossScale transform] Out of range value for "
        "'binEdgeLocation'. The current value is 2, but it should be in the "
        "range [0, 1].",
        "[AutomaticLossScale transform] Out of range value for "
        "'thresholdUpperCountProportion'. The current value is -0.5, but it "
        "should be in the range [0, 1].",
        "[AutomaticLossScale transform] 'updatePeriod' must be >= 1 "
        "(optimizer steps between updates of the loss scale), got 0"};
    EXPECT_EQ(s.status().message(), expected[which]);
  }
}

// ---- GradScaler ----

TEST(GradScalerTest, BackoffOnInfGrowthAfterCleanSteps) {
  // init 4, growth_interval 2. Steps: clean (tracker 1), clean (tracker 2
  // -> S = 8, tracker 0), inf (skip, S = 4, tracker 0), clean (1), clean
  // (S = 8), clean (1).
  GradScalerSettings g;
  g.init_scale = 4;
  g.growth_interval = 2;
  AdamOptimizer adam(0.1f);
  LossScalingOptimizer opt(&adam, LossScaling::GradScaler(g));
  const Grads c = {{1, 1, 1, 1}, {1, 1, 1, 1}, {1, kInf, 1, 1},
                   {1, 1, 1, 1}, {1, 1, 1, 1}, {1, 1, 1, 1}};
  const Steps r =
      Train(opt, DType::kFloat32, c, {"LossScaling/growth_tracker", "w"});
  EXPECT_EQ(r.scales, (std::vector<float>{4, 8, 4, 4, 8, 8}));
  ASSERT_EQ(r.values.size(), 12u);
  std::vector<int> trackers;
  for (int i = 0; i < 6; ++i)
    trackers.push_back(r.values[2 * i].scalar<int32_t>());
  EXPECT_EQ(trackers, (std::vector<int>{1, 0, 0, 1, 0, 1}));
}

TEST(GradScalerTest, SkippedStepLeavesWeightsAndSlotsBitwiseUnchanged) {
  AdamOptimizer adam(0.1f);
  LossScalingOptimizer opt(&adam, LossScaling::GradScaler());
  const std::vector<std::string> vars = {"w", "w/Adam/m", "w/Adam/v",
                                         "Adam/step"};
  const Grads c = {
      {1, -2, 0.5f, 3}, {1, std::nanf(""), 1, 1}, {2, 1, -1, 0.25f}};
  const Steps r = Train(opt, DType::kFloat32, c, vars);
  ASSERT_EQ(r.values.size(), 12u);
  for (int v = 0; v < 4; ++v) {
    EXPECT_TRUE(Same(r.values[4 + v], r.values[v])) << vars[v];
  }
  EXPECT_EQ(r.scales, (std::vector<float>{65536, 32768, 32768}));
  // A clean step is exactly Adam without the scaler (powers of two): run
  // the clean gradients through plain Adam.
  AdamOptimizer plain_adam(0.1f);
  LossScalingOptimizer plain(&plain_adam, LossScaling::Static(1));
  const Steps p = Train(plain, DType::kFloat32, {c[0], c[2]}, vars);
  ASSERT_EQ(p.values.size(), 8u);
  for (int v = 0; v < 4; ++v) {
    EXPECT_TRUE(Same(r.values[8 + v], p.values[4 + v])) << vars[v];
  }
}

TEST(GradScalerTest, WithGradientAccumulationDecidesPerWeightUpdate) {
  // N = 2 micro-batches, Adam, S from 4 with growth_interval 1. Update 1
  // (micro-batches 1-2) clean: applied, S = 8. Update 2: micro-batch 4 has
  // an inf: skipped (w, m, v, Adam's step unchanged; the accumulator
  // emptied), S = 4. Update 3 clean: applied, S = 8. S changes only at the
  // updates. The weights then equal plain accumulation over micro-batches
  // 1, 2, 5, 6.
  GradScalerSettings g;
  g.init_scale = 4;
  g.growth_interval = 1;
  AdamOptimizer adam(0.1f);
  GradientAccumulationOptimizer ga(&adam, 2);
  LossScalingOptimizer opt(&ga, LossScaling::GradScaler(g));
  const Grads c = {{1, 2, 3, 4},    {0.5f, 1, -1, 2},  {1, 1, 1, 1},
                   {1, kInf, 1, 1}, {2, -1, 0.25f, 1}, {-1, 1, 1, 0.5f}};
  const std::vector<std::string> vars = {"w", "GradientAccumulation/w/Adam/m",
                                         "GradientAccumulation/Adam/step"};
  const Steps r = Train(opt, DType::kFloat32, c, vars);
  EXPECT_EQ(r.scales, (std::vector<float>{4, 8, 8, 4, 4, 8}));
  ASSERT_EQ(r.values.size(), 18u);
  for (int v = 0; v < 3; ++v) {
    EXPECT_TRUE(Same(r.values[9 + v], r.values[3 + v])) << vars[v];
  }
  AdamOptimizer plain_adam(0.1f);
  GradientAccumulationOptimizer plain_ga(&plain_adam, 2);
  LossScalingOptimizer plain(&plain_ga, LossScaling::Static(1));
  const Steps p = Train(plain, DType::kFloat32, {c[0], c[1], c[4], c[5]}, vars);
  ASSERT_EQ(p.values.size(), 12u);
  for (int v = 0; v < 3; ++v) {
    EXPECT_TRUE(Same(r.values[15 + v], p.values[9 + v])) << vars[v];
  }
}

TEST(GradScalerTest, SettingsErrors) {
  auto status = [](LossScaling scaling, bool accumulate) {
    Scope s = Scope::NewRootScope();
    LinearLoss l(s, "w", {1, 2});
    GradientDescentOptimizer sgd(0.1f);
    GradientAccumulationOptimizer ga(&sgd, 2);
    LossScalingOptimizer opt(accumulate ? static_cast<Optimizer*>(&ga) : &sgd,
                             scaling);
    opt.Minimize(s, l.loss);
    return s.status();
  };
  GradScalerSettings g;
  g.growth_factor = 1;
  EXPECT_EQ(status(LossScaling::GradScaler(g), false).message(),
            "GradScaler: The growth factor must be > 1.0. (got 1)");
  g = {};
  g.backoff_factor = 1.5f;
  EXPECT_EQ(status(LossScaling::GradScaler(g), false).message(),
            "GradScaler: The backoff factor must be < 1.0. (got 1.5)");
  EXPECT_TRUE(status(LossScaling::GradScaler(), true).ok());
  EXPECT_EQ(status(LossScaling::Static(0), false).code(),
            absl::StatusCode::kInvalidArgument);
}

// ---- On the device: loops and replicas ----

// sum(float32(w) * c * m_r) for a float16 (or float32) w and replica r's
// constant factors m_r = 1 + (1 - r) * extra.
Output ReplicaLoss(const Scope& s, DType dtype, const std::vector<float>& c,
                   const std::vector<float>& extra) {
  const int64_t n = static_cast<int64_t>(c.size());
  std::vector<float> w0(c.size(), 1.f);
  Output init = ops::Const<float>(s, w0, {n});
  if (dtype != DType::kFloat32) init = ops::Cast(s, init, dtype);
  ops::VariableHandle w = ops::Variable(s.WithOpName("w"), init);
  Output one_minus_r =
      ops::Sub(s, ops::Const(s, 1.f),
               ops::Cast(s, ops::ReplicaIndex(s), DType::kFloat32));
  Output factor =
      ops::Add(s, ops::Const<float>(s, std::vector<float>(c.size(), 1.f), {n}),
               ops::Mul(s, ops::Const<float>(s, extra, {n}), one_minus_r));
  Output wf = dtype == DType::kFloat32 ? w.value
                                       : ops::Cast(s, w.value, DType::kFloat32);
  return ops::ReduceSum(
      s, ops::Mul(s, wf, ops::Mul(s, ops::Const<float>(s, c, {n}), factor)));
}

TEST(AutomaticLossScalingTest, ScaleUpdatesInsideADeviceLoop) {
  // Five iterations of loops::Repeat with small gradients: S doubles in
  // each, on the device, from 1 to 32.
  Scope s = Scope::NewRootScope();
  GradientDescentOptimizer sgd(1e-3f);
  sgd.set_master_weights(true);
  LossScalingOptimizer opt(&sgd, LossScaling::Automatic(1));
  auto loop =
      loops::Repeat(s, 5, [&](const Scope& b, const std::vector<Output>&) {
        opt.Minimize(b, ReplicaLoss(b, DType::kFloat16, {1, 1}, {0, 0}));
        return std::vector<Output>{};
      });
  ASSERT_TRUE(loop.ok()) << loop.status();
  IPUConfig config;
  config.set_auto_select_ipus(1);
  auto system = IPUSystem::Create(config);
  ASSERT_TRUE(system.ok()) << system.status();
  IPUStrategy strategy(system->get());
  ASSERT_TRUE(strategy.Initialize(*s.graph()).ok());
  auto r = strategy.Run(*s.graph(), {}, {loop->op}, {});
  ASSERT_TRUE(r.ok()) << r.status();
  auto scale = strategy.Run(*s.graph(), {Read(s, opt.scale_variable())});
  ASSERT_TRUE(scale.ok()) << scale.status();
  EXPECT_EQ((*scale)[0].scalar<float>(), 32.f);
}

TEST(GradScalerTest, InfOnOneReplicaSkipsTheStepOnBoth) {
  // Replica 0's gradient is S * [1, 3e38] = [S, inf]; replica 1's S * [1, 1]
  // (a finite factor: inf * 0 would make replica 1's NaN too). The
  // found-inf count is summed over replicas: both skip (w unchanged) and
  // both back off, so the replicas stay identical.
  Scope s = Scope::NewRootScope();
  Output loss = ReplicaLoss(s, DType::kFloat32, {1, 1}, {0, 3e38f});
  GradientDescentOptimizer sgd(0.5f);
  LossScalingOptimizer opt(&sgd, LossScaling::GradScaler());
  Node* train = opt.Minimize(s, loss);
  ASSERT_TRUE(s.ok()) << s.status();
  IPUConfig config;
  config.set_auto_select_ipus(2);
  auto system = IPUSystem::Create(config);
  ASSERT_TRUE(system.ok()) << system.status();
  IPUStrategy strategy(system->get());
  ASSERT_TRUE(strategy.Initialize(*s.graph()).ok());
  auto r = strategy.Run(*s.graph(), {}, {train}, {});
  ASSERT_TRUE(r.ok()) << r.status();
  auto out =
      strategy.Run(*s.graph(), {Read(s, opt.scale_variable()), Read(s, "w")});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorNear((*out)[0], {32768, 32768}, {2}, 0, 0));
  EXPECT_TRUE(TensorNear((*out)[1], {1, 1, 1, 1}, {2, 2}, 0, 0));
}

// Issue 22: on the IPU with nanoo off (the default) a float16 overflow
// saturates at 65504 instead of becoming inf. The float16 gradient of w is
// float16(S x c) = float16(65536 x 2), saturated: GradScaler must take it
// as an overflow (skip, back off) rather than apply a clipped update.
TEST(GradScalerTest, SaturatedFloat16GradientBacksOffOnTheIpu) {
  Scope s = Scope::NewRootScope();
  LinearLoss l(s, "w", {1, 2, 3, 4}, DType::kFloat16);
  GradientDescentOptimizer sgd(0.5f);
  LossScalingOptimizer opt(&sgd, LossScaling::GradScaler());
  Node* train = opt.Minimize(s, l.loss);
  ASSERT_TRUE(s.ok()) << s.status();
  auto system = IPUSystem::Create(IPUConfig());
  ASSERT_TRUE(system.ok()) << system.status();
  ASSERT_FALSE((*system)->floating_point().nanoo);
  IPUStrategy strategy(system->get());
  ASSERT_TRUE(strategy.Initialize(*s.graph()).ok());
  auto r = strategy.Run(*s.graph(), {}, {train}, l.Feed({0.5f, 2, 0.5f, 0.5f}));
  ASSERT_TRUE(r.ok()) << r.status();
  auto out =
      strategy.Run(*s.graph(), {Read(s, opt.scale_variable()), Read(s, "w")});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].scalar<float>(), 32768.f);
  EXPECT_TRUE(TensorNear((*out)[1], {1, 2, 3, 4}, {4}, 0, 0));
  // In range (S x c = 32768): the step applies, w -= 0.5 x c.
  r = strategy.Run(*s.graph(), {}, {train}, l.Feed({1, 1, 1, 1}));
  ASSERT_TRUE(r.ok()) << r.status();
  out = strategy.Run(*s.graph(), {Read(s, "w")});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorNear((*out)[0], {0.5, 1.5, 2.5, 3.5}, {4}, 0, 0));
}

// Issue 30: a float32 weight computed in float16 (w16 = float16(w), as
// autocast does), nanoo off: d(loss)/d(w16) = float16(S x c) saturates at
// 65504, and the gradient reaches GradScaler as float32 65504 through the
// Cast's gradient. It is counted at that cast: skip and back off.
TEST(GradScalerTest, SaturationHiddenByAFloat16ToFloat32GradientCast) {
  Scope s = Scope::NewRootScope();
  ops::VariableHandle w =
      ops::Variable(s.WithOpName("w"),
                    ops::Const<float>(s, std::vector<float>{1, 2, 3, 4}, {4}));
  Output c = ops::Placeholder(s.WithOpName("c"), DType::kFloat32, {4});
  Output w16 = ops::Cast(s, w.value, DType::kFloat16);
  Output loss =
      ops::ReduceSum(s, ops::Mul(s, ops::Cast(s, w16, DType::kFloat32), c));
  GradientDescentOptimizer sgd(0.5f);
  LossScalingOptimizer opt(&sgd, LossScaling::GradScaler());
  Node* train = opt.Minimize(s, loss);
  ASSERT_TRUE(s.ok()) << s.status();
  auto system = IPUSystem::Create(IPUConfig());
  ASSERT_TRUE(system.ok()) << system.status();
  ASSERT_FALSE((*system)->floating_point().nanoo);
  IPUStrategy strategy(system->get());
  ASSERT_TRUE(strategy.Initialize(*s.graph()).ok());
  auto feed = [&](std::vector<float> v) -> FeedList {
    return {{c, Tensor::FromVector<float>(v)}};
  };
  // S x 2 = 131072: saturated in float16.
  auto r = strategy.Run(*s.graph(), {}, {train}, feed({0.5f, 2, 0.5f, 0.5f}));
  ASSERT_TRUE(r.ok()) << r.status();
  auto out =
      strategy.Run(*s.graph(), {Read(s, opt.scale_variable()), Read(s, "w")});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].scalar<float>(), 32768.f);
  EXPECT_TRUE(TensorNear((*out)[1], {1, 2, 3, 4}, {4}, 0, 0));
  // In range (S x c = 32768): the step applies, w -= 0.5 x c.
  r = strategy.Run(*s.graph(), {}, {train}, feed({1, 1, 1, 1}));
  ASSERT_TRUE(r.ok()) << r.status();
  out = strategy.Run(*s.graph(), {Read(s, "w")});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorNear((*out)[0], {0.5, 1.5, 2.5, 3.5}, {4}, 0, 0));
}

}  // namespace
}  // namespace ipuflow::optimizers
