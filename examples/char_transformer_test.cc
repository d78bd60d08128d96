// The character transformer: its logits are causal, its initial loss is
// that of a uniform guess, the tied embedding's gradient (both of its uses
// summed) and a block weight's match finite differences, a tiny
// configuration trains on a slice of the fortunes text to a fixed loss,
// and sampling draws from the vocabulary (greedy with top-k 1).
#include <cmath>
#include <memory>
#include <set>
#include <vector>

#include "core/ipu/ipu_strategy.h"
#include "core/ipu/ipu_system.h"
#include "core/session.h"
#include "examples/char_transformer_training.h"
#include "examples/transformer_model.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/state/assign.h"
#include "ops/state/read_variable.h"
#include "optimizers/gradient_descent.h"
#include "pipelining/pipeline.h"

namespace ipuflow {
namespace {

models::TransformerConfig Tiny() {
  models::TransformerConfig c;
  c.vocab = 5;
  c.context = 4;
  c.layers = 2;
  c.width = 8;
  c.heads = 2;
  return c;
}

Tensor Ids(const std::vector<int32_t>& v, int64_t batch, int64_t t) {
  Tensor x(DType::kInt32, TensorShape({batch, t}));
  std::copy(v.begin(), v.end(), x.data<int32_t>());
  return x;
}

struct TinyModel {
  Scope scope = Scope::NewRootScope();
  models::TransformerParams params;
  Output inputs, targets, logits, loss;
  std::unique_ptr<Session> session;

  explicit TinyModel(int64_t batch) {
    params = models::CreateTransformerParams(scope, Tiny(), /*seed=*/7);
    inputs = ops::Placeholder(scope, DType::kInt32, {batch, 4});
    targets = ops::Placeholder(scope, DType::kInt32, {batch, 4});
    logits = models::TransformerLogits(scope, params, inputs);
    loss = models::TransformerLoss(scope, logits, targets);
  }
  void Start() {
    ASSERT_TRUE(scope.ok()) << scope.status();
    session = std::make_unique<Session>(scope.graph());
    ASSERT_TRUE(session->Initialize().ok());
  }
};

TEST(TransformerModelTest, LogitsAreCausalAndTheFirstLossIsAUniformGuess) {
  TinyModel m(1);
  m.Start();
  std::vector<Tensor> a, b;
  ASSERT_TRUE(
      m.session->Run({{m.inputs, Ids({1, 2, 3, 4}, 1, 4)}}, {m.logits}, &a)
          .ok());
  // Position 2 changed: the logits of positions 0 and 1 are the same.
  ASSERT_TRUE(
      m.session->Run({{m.inputs, Ids({1, 2, 0, 4}, 1, 4)}}, {m.logits}, &b)
          .ok());
  ASSERT_EQ(a[0].shape(), TensorShape({4, 5}));
  const float* x = a[0].data<float>();
  const float* y = b[0].data<float>();
  for (int i = 0; i < 10; ++i) EXPECT_EQ(x[i], y[i]) << i;
  bool later_changed = false;
  for (int i = 10; i < 20; ++i) later_changed |= x[i] != y[i];
  EXPECT_TRUE(later_changed);
  // Weights of 0.02: the logits are near 0, the loss near ln 5.
  std::vector<Tensor> loss;
  ASSERT_TRUE(m.session
                  ->Run({{m.inputs, Ids({1, 2, 3, 4}, 1, 4)},
                         {m.targets, Ids({2, 3, 4, 0}, 1, 4)}},
                        {m.loss}, &loss)
                  .ok());
  EXPECT_NEAR(loss[0].scalar<float>(), std::log(5.0f), 0.05);
}

TEST(TransformerModelTest, GradientsMatchFiniteDifferences) {
  TinyModel m(2);
  optimizers::GradientDescentOptimizer sgd(0.1f);
  const std::vector<optimizers::GradAndVar> grads =
      sgd.ComputeGradients(m.scope, m.loss);
  struct Checked {
    const char* what;
    Output grad, read, value;
    Node* assign = nullptr;
  };
  // The tied embedding (read by the lookup and by the head: the optimizer
  // sums both reads' gradients) and the first block's attention weight.
  std::vector<Checked> checked;
  const std::pair<const char*, Output> weights[] = {
      {"wte", m.params.token_embedding}, {"attn_w", m.params.blocks[0].attn_w}};
  for (const auto& [what, handle] : weights) {
    Checked c{what};
    for (const auto& g : grads) {
      if (g.variable == handle.node) c.grad = g.grad;
    }
    ASSERT_TRUE(c.grad.valid()) << what;
    c.read = ops::ReadVariable(m.scope, handle);
    c.value = ops::Placeholder(m.scope, DType::kFloat32, c.grad.shape());
    c.assign = ops::Assign(m.scope, handle, c.value);
    checked.push_back(c);
  }
  m.Start();
  const FeedList data = {{m.inputs, Ids({0, 1, 2, 3, 4, 4, 3, 1}, 2, 4)},
                         {m.targets, Ids({1, 2, 3, 4, 4, 3, 1, 0}, 2, 4)}};
  auto loss_with = [&](const Checked& c, const Tensor& w) {
    std::vector<Tensor> out;
    EXPECT_TRUE(m.session->Run({{c.value, w}}, {}, {c.assign}, &out).ok());
    EXPECT_TRUE(m.session->Run(data, {m.loss}, &out).ok());
    return static_cast<double>(out[0].scalar<float>());
  };
  for (const Checked& c : checked) {
    std::vector<Tensor> out;
    ASSERT_TRUE(m.session->Run(data, {c.grad, c.read}, &out).ok());
    const Tensor analytic = out[0], w0 = out[1];
    const int64_t n = w0.NumElements();
    // Small beside the weights (0.02): LayerNorm of the embeddings, whose
    // spread is about 0.03, is far from linear over larger steps.
    constexpr double kDelta = 1e-3;
    for (int64_t k = 0; k < n; ++k) {
      Tensor plus = w0.Copy(), minus = w0.Copy();
      plus.data<float>()[k] += kDelta;
      minus.data<float>()[k] -= kDelta;
      const double fd =
          (loss_with(c, plus) - loss_with(c, minus)) / (2 * kDelta);
      const double g = analytic.data<float>()[k];
      EXPECT_NEAR(g, fd, 2e-3 + 0.03 * std::abs(fd))
          << c.what << "[" << k << "]";
    }
    loss_with(c, w0);
  }
}

examples::CharTransformerOptions TinyTraining() {
  examples::CharTransformerOptions o;
  o.corpus.max_bytes = 30000;
  o.model.context = 16;
  o.model.layers = 1;
  o.model.width = 32;
  o.model.heads = 2;
  o.batch_size = 8;
  o.steps = 400;
  o.device_iterations = 50;
  o.eval_every = 200;
  o.eval_batches = 4;
  o.learning_rate = 3e-3f;
  return o;
}

TEST(CharTransformerTrainingTest, ATinyModelLearnsTheFortunes) {
  auto system = std::move(IPUSystem::Create(IPUConfig())).value();
  auto trainer =
      examples::CharTransformerTrainer::Create(system.get(), TinyTraining());
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  int64_t last_step = 0;
  auto report = (*trainer)->Train(
      [&](int64_t step, int64_t, float) { last_step = step; });
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->steps, 400);
  EXPECT_EQ(last_step, 400);
  // Validation at steps 0, 200 and 400: from a uniform guess over the
  // vocabulary (ln 83 = 4.42) to well below the held-out loss of the best
  // model that ignores context, the training text's character frequencies
  // (3.30 on this slice; a smoothed bigram model: 2.61).
  ASSERT_EQ(report->validation.size(), 3u);
  const feeds::CharCorpus& corpus = (*trainer)->corpus();
  const int vocab = corpus.vocab_size();
  std::vector<double> counts(vocab, 1.0);  // Add-one.
  for (int32_t id : corpus.train.span<int32_t>()) counts[id] += 1;
  const double total = corpus.train.NumElements() + vocab;
  double unigram = 0;
  for (int32_t id : corpus.validation.span<int32_t>()) {
    unigram -= std::log(counts[id] / total);
  }
  unigram /= corpus.validation.NumElements();
  EXPECT_NEAR(report->validation[0].second, std::log(vocab), 0.1);
  EXPECT_LT(report->validation[2].second, unigram - 0.25);
  EXPECT_LT(report->final_loss, unigram - 0.25);
  EXPECT_GT(report->tokens_per_second, 0);

  // Greedy sampling (top-k 1) does not depend on the seed; every
  // character is the corpus'.
  examples::SampleOptions greedy;
  greedy.top_k = 1;
  auto a = (*trainer)->Sample("The ", 40, greedy);
  greedy.seed = 99;
  auto b = (*trainer)->Sample("The ", 40, greedy);
  ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
  EXPECT_EQ(a->size(), 40u);
  EXPECT_EQ(*a, *b);
  for (char ch : *a) EXPECT_NE(corpus.vocab.find(ch), std::string::npos);
  examples::SampleOptions bad;
  bad.temperature = 0;
  EXPECT_EQ((*trainer)->Sample("The ", 4, bad).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE((*trainer)->Sample("\x01", 4, {}).ok());
}

// The trainer pipelined over 3 IPUs (embedding and head on IPU 0, one
// block each on IPUs 1 and 2, recomputation checkpoints, running-mean
// accumulation of 4 micro-batches of 2) follows the device loop training
// on batches of 8 with `optimizer`: the same windows, the same initial
// weights, `steps` steps (one device-loop run of 10 between evaluations).
void ExpectPipelinedFollowsTheDeviceLoop(
    examples::TransformerOptimizer optimizer, int steps) {
  examples::CharTransformerOptions o = TinyTraining();
  o.optimizer = optimizer;
  o.model.layers = 2;
  o.steps = steps;
  o.device_iterations = 10;
  o.eval_every = steps;
  auto loop_system = std::move(IPUSystem::Create(IPUConfig())).value();
  auto loop = examples::CharTransformerTrainer::Create(loop_system.get(), o);
  ASSERT_TRUE(loop.ok()) << loop.status();
  std::vector<float> loop_losses;
  auto loop_report = (*loop)->Train(
      [&](int64_t, int64_t, float l) { loop_losses.push_back(l); });
  ASSERT_TRUE(loop_report.ok()) << loop_report.status();

  o.pipeline_ipus = 3;
  o.micro_batches = 4;
  IPUConfig config;
  config.set_auto_select_ipus(3);
  config.set_allow_recompute(true);
  auto system = std::move(IPUSystem::Create(config)).value();
  auto piped = examples::CharTransformerTrainer::Create(system.get(), o);
  ASSERT_TRUE(piped.ok()) << piped.status();
  std::vector<float> piped_losses;
  auto report = (*piped)->Train(
      [&](int64_t, int64_t, float l) { piped_losses.push_back(l); });
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_EQ(piped_losses.size(), static_cast<size_t>(steps));
  ASSERT_EQ(loop_losses.size(), static_cast<size_t>(steps));
  for (int step = 0; step < steps; ++step) {
    EXPECT_NEAR(piped_losses[step], loop_losses[step], 1e-4) << step;
  }
  // The updates moved the weights: the losses are not the first one's.
  EXPECT_GT(std::abs(loop_losses[steps - 1] - loop_losses[0]), 1e-3);
  ASSERT_EQ(report->validation.size(), 2u);
  EXPECT_NEAR(report->validation[1].second, loop_report->validation[1].second,
              1e-4);
  EXPECT_NE(report->pipeline_summary.find("bubble"), std::string::npos)
      << report->pipeline_summary;
}

TEST(CharTransformerTrainingTest, PipelinedTrainerFollowsTheDeviceLoop) {
  ExpectPipelinedFollowsTheDeviceLoop(examples::TransformerOptimizer::kAdamW,
                                      30);
}

// LAMB's trust ratio needs each whole variable's norms: the pipelined
// update (per IPU, after the accumulation) still equals the loop's.
TEST(CharTransformerTrainingTest, PipelinedLambFollowsTheDeviceLoop) {
  ExpectPipelinedFollowsTheDeviceLoop(examples::TransformerOptimizer::kLamb,
                                      10);
}

TEST(CharTransformerTrainingTest, OptimizerNames) {
  EXPECT_EQ(*examples::TransformerOptimizerFromName("lamb"),
            examples::TransformerOptimizer::kLamb);
  EXPECT_EQ(*examples::TransformerOptimizerFromName("adamw"),
            examples::TransformerOptimizer::kAdamW);
  absl::Status bad = examples::TransformerOptimizerFromName("adam").status();
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("'adam'"), absl::string_view::npos) << bad;
}

TEST(CharTransformerTrainingTest, OptionsOutOfRangeAreRefused) {
  auto system = std::move(IPUSystem::Create(IPUConfig())).value();
  auto refused = [&](examples::CharTransformerOptions o) {
    return examples::CharTransformerTrainer::Create(system.get(), o).status();
  };
  examples::CharTransformerOptions o = TinyTraining();
  o.model.heads = 3;  // 32 is not divisible by 3.
  EXPECT_EQ(refused(o).code(), absl::StatusCode::kInvalidArgument);
  o = TinyTraining();
  o.model.dropout = 1;
  EXPECT_EQ(refused(o).code(), absl::StatusCode::kInvalidArgument);
  o = TinyTraining();
  o.batch_size = 0;
  EXPECT_EQ(refused(o).code(), absl::StatusCode::kInvalidArgument);
  o = TinyTraining();
  o.beta2 = 1;
  EXPECT_EQ(refused(o).code(), absl::StatusCode::kInvalidArgument);
  o = TinyTraining();
  o.optimizer = static_cast<examples::TransformerOptimizer>(2);
  EXPECT_EQ(refused(o).code(), absl::StatusCode::kInvalidArgument);
  o = TinyTraining();
  o.model.context = 40000;  // Longer than the 30000-character slice.
  EXPECT_EQ(refused(o).code(), absl::StatusCode::kInvalidArgument);
  o = TinyTraining();
  o.steps = int64_t{1} << 40;
  EXPECT_EQ(refused(o).code(), absl::StatusCode::kInvalidArgument);
  o = TinyTraining();
  o.model.width = 1 << 14;  // A 4w x w MLP weight of 2^30 elements.
  o.model.heads = 1;
  EXPECT_EQ(refused(o).code(), absl::StatusCode::kInvalidArgument);
  o = TinyTraining();
  o.pipeline_ipus = 3;  // 1 block: at most 2 IPUs.
  EXPECT_EQ(refused(o).code(), absl::StatusCode::kInvalidArgument);
  o.pipeline_ipus = 2;
  o.micro_batches = 3;  // Does not divide 8.
  EXPECT_EQ(refused(o).code(), absl::StatusCode::kInvalidArgument);
  o.micro_batches = 4;  // The system has 1 IPU, not 2.
  EXPECT_EQ(refused(o).code(), absl::StatusCode::kFailedPrecondition);
}

// Pipelined as Graphcore pipelines BERT (ops_and_transformer.md, section
// 2): the embedding on IPU 0, one block on each of IPUs 1 and 2, the head
// back on IPU 0 reading the tied embedding again, the Grouped schedule,
// mean accumulation over 4 micro-batches of 2 windows. Three weight
// updates give the losses of a device loop training on the combined
// batches of 8: each step's loss is the mean of its micro-batches'.
TEST(CharTransformerPipelineTest, PipelinedAsBertEqualsTheDeviceLoop) {
  constexpr int kMicro = 4, kWindows = 2, kSteps = 3;
  models::TransformerConfig config = Tiny();
  Tensor text(DType::kInt32, TensorShape({500}));
  for (int i = 0; i < 500; ++i) {
    text.data<int32_t>()[i] = (i * 7 + i / 5) % 5;
  }
  auto windows = [&](int batch) {
    return feeds::CharWindows(text, config.context, /*seed=*/5)
        ->Batch(batch, /*drop_remainder=*/true);
  };
  // The device loop: one IPU, batches of 8.
  std::vector<float> loop_losses;
  {
    auto system = std::move(IPUSystem::Create(IPUConfig())).value();
    Scope scope = Scope::NewRootScope();
    auto params = models::CreateTransformerParams(scope, config, 3);
    auto infeed = *feeds::IPUInfeedQueue::Create(windows(kMicro * kWindows));
    auto outfeed = *feeds::IPUOutfeedQueue::Create();
    optimizers::GradientDescentOptimizer sgd(0.5f);
    auto loop = loops::Repeat(
        scope, kSteps,
        [&](const Scope& s, const std::vector<Output>& batch) {
          Output logits = models::TransformerLogits(s, params, batch[0]);
          Output loss = models::TransformerLoss(s, logits, batch[1]);
          sgd.Minimize(s, loss);
          outfeed->Enqueue(s, {{"loss", loss}});
          return std::vector<Output>{};
        },
        {}, infeed.get());
    ASSERT_TRUE(loop.ok()) << loop.status();
    IPUStrategy strategy(system.get());
    ASSERT_TRUE(strategy.Initialize(*scope.graph()).ok());
    ASSERT_TRUE(strategy.Run(*scope.graph(), {}, {loop->op}).ok());
    auto out = outfeed->Dequeue();
    ASSERT_TRUE(out.ok()) << out.status();
    for (float l : (*out)["loss"].span<float>()) loop_losses.push_back(l);
  }
  ASSERT_EQ(loop_losses.size(), static_cast<size_t>(kSteps));

  IPUConfig ipus;
  ipus.set_auto_select_ipus(3);
  auto system = std::move(IPUSystem::Create(ipus)).value();
  Scope scope = Scope::NewRootScope();
  // Each variable on the IPU of the stages that read it.
  auto params = models::CreateTransformerParams(
      scope, config, 3, {scope.WithIpu(0), scope.WithIpu(1), scope.WithIpu(2)});
  auto infeed = *feeds::IPUInfeedQueue::Create(windows(kWindows));
  auto outfeed = *feeds::IPUOutfeedQueue::Create();
  pipelining::PipelineOptions o;
  using Args = std::vector<Output>;
  o.computational_stages = {
      [&](const Scope& s, const Args& a) {
        return Args{models::TransformerEmbed(s, params, a[0]), a[1]};
      },
      [&](const Scope& s, const Args& a) {
        return Args{models::TransformerBlock(s, params, 0, a[0]), a[1]};
      },
      [&](const Scope& s, const Args& a) {
        return Args{models::TransformerBlock(s, params, 1, a[0]), a[1]};
      },
      [&](const Scope& s, const Args& a) {
        return Args{models::TransformerHead(s, params, a[0]), a[1]};
      }};
  o.device_mapping = {0, 1, 2, 0};
  o.gradient_accumulation_count = kMicro;
  o.repeat_count = kSteps;
  o.reduction_method = pipelining::ReductionMethod::kMean;
  o.pipeline_schedule = pipelining::PipelineSchedule::kGrouped;
  o.infeed_queue = infeed.get();
  o.outfeed_queue = outfeed.get();
  o.outfeed_loss = true;
  o.optimizer_function = [](const Scope& s, const Args& out) {
    return pipelining::OptimizerFunctionOutput{
        std::make_shared<optimizers::GradientDescentOptimizer>(0.5f),
        models::TransformerLoss(s, out[0], out[1])};
  };
  auto pipeline = pipelining::Pipeline::Create(scope, o);
  ASSERT_TRUE(pipeline.ok()) << pipeline.status();
  IPUStrategy strategy(system.get());
  ASSERT_TRUE(strategy.Initialize(*scope.graph()).ok());
  auto exe = strategy.Compile(*scope.graph(), {}, {(*pipeline)->frame()});
  ASSERT_TRUE(exe.ok()) << exe.status();
  std::vector<std::vector<Tensor>> results;
  ASSERT_TRUE((*exe)->Execute({{}}, &results).ok());
  auto out = outfeed->Dequeue();
  ASSERT_TRUE(out.ok()) << out.status();
  const Tensor& losses = (*out)["loss"];
  ASSERT_EQ(losses.NumElements(), kSteps * kMicro);
  for (int step = 0; step < kSteps; ++step) {
    double mean = 0;
    for (int m = 0; m < kMicro; ++m) {
      mean += losses.data<float>()[step * kMicro + m] / kMicro;
    }
    EXPECT_NEAR(mean, loop_losses[step], 2e-5) << "step " << step;
  }
  // The weights moved: the last step's loss is not the first's.
  EXPECT_GT(std::abs(loop_losses[2] - loop_losses[0]), 1e-3);
}

}  // namespace
}  // namespace ipuflow
