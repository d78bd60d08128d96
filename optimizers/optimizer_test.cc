#include "optimizers/optimizer.h"

#include <cmath>
#include <functional>
#include <limits>
#include <memory>

#include "core/testing/op_test.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/math/add.h"
#include "ops/math/add_n.h"
#include "ops/math/cast.h"
#include "ops/math/mul.h"
#include "ops/math/reduce_sum.h"
#include "ops/state/read_variable.h"
#include "optimizers/adam.h"
#include "optimizers/adamw.h"
#include "optimizers/gradient_descent.h"
#include "optimizers/lamb.h"
#include "optimizers/loss_scaling.h"
#include "optimizers/momentum.h"
#include "optimizers/rms_prop.h"
#include "optimizers/test_util.h"

namespace ipuflow::optimizers {
namespace {

using ::ipuflow::optimizers::testing::LinearLoss;
using ::ipuflow::optimizers::testing::RunSteps;
using ::ipuflow::testing::TensorNear;

std::string Message(const Scope& s) {
  return std::string(s.status().message());
}

TEST(OptimizerTest, ComputeGradientsOfALinearLoss) {
  Scope s = Scope::NewRootScope();
  LinearLoss l(s, "w", {1, 2});
  GradientDescentOptimizer sgd(0.1f);
  std::vector<GradAndVar> g = sgd.ComputeGradients(s, l.loss);
  ASSERT_EQ(g.size(), 1u) << s.status();
  EXPECT_EQ(g[0].variable, l.w.handle.node);
  absl::StatusOr<std::vector<Tensor>> out =
      ipuflow::testing::RunGraph(s, l.Feed({0.5f, -1}), {g[0].grad});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorNear((*out)[0], {0.5f, -1}, {2}));
}

TEST(OptimizerTest, AVariableReadTwiceGetsBothContributions) {
  // loss = sum(w * c) + sum(read2(w) * [10, 20]):  d/dw = c + [10, 20].
  Scope s = Scope::NewRootScope();
  LinearLoss l(s, "w", {1, 2});
  Output second =
      ops::ReduceSum(s, ops::Mul(s, ops::ReadVariable(s, l.w.handle),
                                 ops::Const<float>(s, {10, 20}, {2})));
  Output loss = ops::Add(s, l.loss, second);
  GradientDescentOptimizer sgd(0.1f);
  Node* train = sgd.Minimize(s, loss);
  // w = [1, 2] - 0.1 * ([1, 1] + [10, 20]) = [-0.1, -0.1].
  std::vector<Tensor> w = RunSteps(s, train, {l.Feed({1, 1})}, l.w.value);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_TRUE(TensorNear(w[0], {-0.1f, -0.1f}, {2}));
}

TEST(OptimizerTest, VariablesTheLossIgnoresAreLeftAlone) {
  Scope s = Scope::NewRootScope();
  LinearLoss l(s, "w", {1, 2});
  ops::VariableHandle u =
      ops::Variable(s.WithOpName("u"), ops::Const<float>(s, {5}, {1}));
  GradientDescentOptimizer sgd(0.1f);
  std::vector<GradAndVar> g = sgd.ComputeGradients(s, l.loss);
  ASSERT_EQ(g.size(), 2u) << s.status();
  EXPECT_TRUE(g[0].grad.valid());
  EXPECT_EQ(g[1].variable, u.handle.node);
  EXPECT_FALSE(g[1].grad.valid());
  Node* train = sgd.ApplyGradients(s, g);
  std::vector<Tensor> uv = RunSteps(s, train, {l.Feed({1, 1})}, u.value);
  ASSERT_EQ(uv.size(), 1u);
  EXPECT_TRUE(TensorNear(uv[0], {5}, {1}));
}

TEST(OptimizerTest, NoVariableInTheLossIsAnError) {
  Scope s = Scope::NewRootScope();
  LinearLoss l(s, "w", {1, 2});
  ops::VariableHandle u =
      ops::Variable(s.WithOpName("u"), ops::Const<float>(s, {5}, {1}));
  EXPECT_EQ(
      GradientDescentOptimizer(0.1f).Minimize(s, l.loss, VarList::Of({u})),
      nullptr);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(Message(s).find("GradientDescent optimizer: the loss 'ReduceSum:0' "
                            "reads none of the variables 'u'"),
            std::string::npos)
      << s.status();
}

TEST(OptimizerTest, ApplyGradientsWithoutAnyGradientIsAnError) {
  Scope s = Scope::NewRootScope();
  LinearLoss l(s, "w", {1, 2});
  GradientDescentOptimizer(0.1f).ApplyGradients(s,
                                                {{Output(), l.w.handle.node}});
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(Message(s).find("no gradient for any variable ('w')"),
            std::string::npos)
      << s.status();
}

TEST(OptimizerTest, MatchingTrainsOnlyTheMatchingVariables) {
  Scope s = Scope::NewRootScope();
  LinearLoss d1(s.NewSubScope("dense_1"), "w", {1, 1});
  LinearLoss d2(s.NewSubScope("dense_2"), "w", {2, 2});
  LinearLoss head(s.NewSubScope("head"), "w", {3, 3});
  Output loss = ops::AddN(s, {d1.loss, d2.loss, head.loss});
  Node* train = GradientDescentOptimizer(0.5f).Minimize(
      s, loss, VarList::Matching("dense_[0-9]+/.*"));
  ASSERT_TRUE(s.ok()) << s.status();
  FeedList feed = d1.Feed({1, 2});
  for (const LinearLoss* l : {&d2, &head}) {
    FeedList f = l->Feed({1, 2});
    feed.insert(feed.end(), f.begin(), f.end());
  }
  Session session(s.graph());
  ASSERT_TRUE(session.Initialize().ok());
  ASSERT_TRUE(session.Run(feed, {}, {train}, nullptr).ok());
  std::vector<Tensor> out;
  ASSERT_TRUE(
      session.Run({}, {d1.w.value, d2.w.value, head.w.value}, &out).ok());
  EXPECT_TRUE(TensorNear(out[0], {0.5f, 0}, {2}));  // [1, 1] - 0.5 * [1, 2]
  EXPECT_TRUE(TensorNear(out[1], {1.5f, 1}, {2}));  // [2, 2] - 0.5 * [1, 2]
  EXPECT_TRUE(TensorNear(out[2], {3, 3}, {2}));     // Not selected.
}

TEST(OptimizerTest, PatternMatchingNothingIsAnErrorNamingIt) {
  Scope s = Scope::NewRootScope();
  LinearLoss l(s, "w", {1, 2});
  GradientDescentOptimizer(0.1f).Minimize(s, l.loss,
                                          VarList::Matching("conv_[0-9]+/.*"));
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(Message(s).find("pattern 'conv_[0-9]+/.*'"), std::string::npos)
      << s.status();
}

TEST(OptimizerTest, NonTrainableVariablesAreNotTrainedByDefault) {
  Scope s = Scope::NewRootScope();
  LinearLoss l(s, "w", {1, 2});
  ops::VariableHandle frozen = ops::Variable(
      s.WithOpName("frozen"), ops::Const<float>(s, {1, 2}, {2}), {"", false});
  Output loss =
      ops::Add(s, l.loss, ops::ReduceSum(s, ops::Mul(s, frozen.value, l.c)));
  Node* train = GradientDescentOptimizer(1.f).Minimize(s, loss);
  std::vector<Tensor> f = RunSteps(s, train, {l.Feed({1, 1})}, frozen.value);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_TRUE(TensorNear(f[0], {1, 2}, {2}));
}

TEST(OptimizerTest, TheStepSeesTheWeightsBeforeItsUpdates) {
  // Fetching the loss in the training run gives the loss before the update.
  Scope s = Scope::NewRootScope();
  LinearLoss l(s, "w", {1, 2});
  Node* train = GradientDescentOptimizer(1.f).Minimize(s, l.loss);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(train->name(), "GradientDescent/apply");
  Session session(s.graph(), {/*intra_op_threads=*/2, /*inter_op_threads=*/4});
  ASSERT_TRUE(session.Initialize().ok());
  std::vector<Tensor> out;
  for (float expected : {1 * 1 + 2 * 3, 0 * 1 + -1 * 3}) {
    ASSERT_TRUE(session.Run(l.Feed({1, 3}), {l.loss}, {train}, &out).ok());
    EXPECT_TRUE(TensorNear(out[0], {expected}, {}));
  }
}

TEST(OptimizerTest, LearningRateAsATensor) {
  Scope s = Scope::NewRootScope();
  LinearLoss l(s, "w", {1, 2});
  Output lr = ops::Placeholder(s.WithOpName("lr"), DType::kFloat32, {});
  Node* train = GradientDescentOptimizer(lr).Minimize(s, l.loss);
  FeedList f1 = l.Feed({1, 1}), f2 = l.Feed({1, 1});
  f1.push_back({lr, Tensor::Scalar<float>(0.5f)});
  f2.push_back({lr, Tensor::Scalar<float>(0.25f)});
  std::vector<Tensor> w = RunSteps(s, train, {f1, f2}, l.w.value);
  ASSERT_EQ(w.size(), 2u);
  EXPECT_TRUE(TensorNear(w[0], {0.5f, 1.5f}, {2}));
  EXPECT_TRUE(TensorNear(w[1], {0.25f, 1.25f}, {2}));
}

TEST(OptimizerTest, LearningRateTensorMustBeAFloatScalar) {
  Scope s = Scope::NewRootScope();
  LinearLoss l(s, "w", {1, 2});
  Output lr = ops::Const<float>(s, {0.1f, 0.1f}, {2});
  GradientDescentOptimizer(lr).Minimize(s, l.loss);
  EXPECT_NE(Message(s).find("input 'lr' must be a float32 scalar"),
            std::string::npos)
      << s.status();
}

// Issue 22: a NaN, infinite or negative constant learning rate (or
// momentum) is refused when the update is built, naming the optimizer, the
// field and the value; before, training ran and produced garbage.
TEST(OptimizerTest, NonFiniteOrNegativeLearningRatesAreRefused) {
  const float kInf = std::numeric_limits<float>::infinity();
  for (float lr : {std::nanf(""), kInf, -kInf, -1.f}) {
    for (int kind = 0; kind < 4; ++kind) {
      Scope s = Scope::NewRootScope();
      LinearLoss l(s, "w", {1, 2});
      std::unique_ptr<Optimizer> opt;
      if (kind == 0) opt = std::make_unique<GradientDescentOptimizer>(lr);
      if (kind == 1) opt = std::make_unique<AdamOptimizer>(lr);
      if (kind == 2) opt = std::make_unique<MomentumOptimizer>(lr, 0.9f);
      if (kind == 3) opt = std::make_unique<MomentumOptimizer>(0.1f, lr);
      EXPECT_EQ(opt->Minimize(s, l.loss), nullptr);
      EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
      EXPECT_THAT(Message(s),
                  ::testing::HasSubstr(absl::StrCat(
                      opt->name(), " optimizer: ",
                      kind == 3 ? "momentum" : "learning_rate", " is ")))
          << lr;
    }
  }
  // 0 is a valid (frozen) rate.
  Scope s = Scope::NewRootScope();
  LinearLoss l(s, "w", {1, 2});
  GradientDescentOptimizer zero(0.f);
  EXPECT_NE(zero.Minimize(s, l.loss), nullptr) << s.status();
}

// Issue 30: the other constant options over their whole range (SGD's are
// in sgd_test.cc), torch.optim's rules, refused when the update is built.
TEST(OptimizerTest, OptionsOutOfRangeAreRefused) {
  const float kNaN = std::nanf(""), kInf = INFINITY;
  struct Bad {
    std::function<std::unique_ptr<Optimizer>()> make;
    const char* message;
  };
  const Bad bad[] = {
      {[&] { return std::make_unique<AdamOptimizer>(0.1f, 1.f); },
       "Adam optimizer: beta1 is 1; it must be in [0, 1)"},
      {[&] { return std::make_unique<AdamOptimizer>(0.1f, -0.1f); },
       "Adam optimizer: beta1 is -0.1"},
      {[&] { return std::make_unique<AdamOptimizer>(0.1f, 0.9f, kNaN); },
       "Adam optimizer: beta2 is nan"},
      {[&] { return std::make_unique<AdamOptimizer>(0.1f, 0.9f, 0.999f, -1); },
       "Adam optimizer: epsilon is -1"},
      {[&] { return std::make_unique<AdamWOptimizer>(0.1f, -0.01f); },
       "AdamW optimizer: weight_decay is -0.01"},
      {[&] { return std::make_unique<AdamWOptimizer>(0.1f, kInf); },
       "AdamW optimizer: weight_decay is inf"},
      {[&] { return std::make_unique<LambOptimizer>(0.1f, 0, 0.9f, 1.5f); },
       "Lamb optimizer: beta2 is 1.5"},
      {[&] { return std::make_unique<RMSPropOptimizer>(0.1f, 1.5f); },
       "RMSProp optimizer: rho is 1.5"},
      {[&] { return std::make_unique<RMSPropOptimizer>(0.1f, 0.9f, -0.5f); },
       "RMSProp optimizer: momentum is -0.5"},
      {[&] { return std::make_unique<RMSPropOptimizer>(0.1f, 0.9f, 0, kNaN); },
       "RMSProp optimizer: epsilon is nan"},
      {[&] { return std::make_unique<AdagradOptimizer>(0.1f, -1.f); },
       "Adagrad optimizer: initial_accumulator_value is -1"},
      {[&] { return std::make_unique<AdagradOptimizer>(0.1f, 0.1f, kInf); },
       "Adagrad optimizer: epsilon is inf"},
  };
  for (const Bad& b : bad) {
    Scope s = Scope::NewRootScope();
    LinearLoss l(s, "w", {1, 2});
    EXPECT_EQ(b.make()->Minimize(s, l.loss), nullptr) << b.message;
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument)
        << s.status();
    EXPECT_THAT(Message(s), ::testing::HasSubstr(b.message));
  }
}

// Issue 22: Minimize of an integer loss was OK (no gradient, no update).
TEST(OptimizerTest, AnIntegerLossIsRefused) {
  for (bool scaled : {false, true}) {
    Scope s = Scope::NewRootScope();
    LinearLoss l(s, "w", {1, 2});
    Output int_loss = ops::Cast(s, l.loss, DType::kInt32);
    GradientDescentOptimizer sgd(0.1f);
    LossScalingOptimizer scaler(&sgd, LossScaling::Static(4));
    Optimizer& opt = scaled ? static_cast<Optimizer&>(scaler) : sgd;
    EXPECT_EQ(opt.Minimize(s, int_loss), nullptr);
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(Message(s), ::testing::HasSubstr(
                                "is int32; a loss to minimize must be float32 "
                                "or float16"));
  }
}

}  // namespace
}  // namespace ipuflow::optimizers
