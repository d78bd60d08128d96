#include "examples/char_transformer_training.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>

#include "absl/strings/str_cat.h"
#include "examples/tutorial_support.h"
#include "ops/array/const.h"
#include "optimizers/adamw.h"
#include "optimizers/cross_replica.h"

namespace ipuflow::examples {

absl::Status CharTransformerOptions::Validate() const {
  auto bad = [](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat("char transformer: ", what));
  };
  if (batch_size < 1 || batch_size > 65536) {
    return bad(absl::StrCat("batch_size ", batch_size, " not in [1, 65536]"));
  }
  if (steps < 1 || device_iterations < 1 || eval_every < 1 ||
      eval_batches < 1) {
    return bad(absl::StrCat("steps ", steps, ", device_iterations ",
                            device_iterations, ", eval_every ", eval_every,
                            " and eval_batches ", eval_batches,
                            " must be positive"));
  }
  if (!(learning_rate > 0) || !(weight_decay >= 0) ||
      !(beta2 > 0 && beta2 < 1)) {
    return bad(absl::StrCat("learning_rate ", learning_rate,
                            " must be > 0, weight_decay ", weight_decay,
                            " >= 0, beta2 ", beta2, " in (0, 1)"));
  }
  return absl::OkStatus();
}

CharTransformerTrainer::~CharTransformerTrainer() = default;

absl::StatusOr<std::unique_ptr<CharTransformerTrainer>>
CharTransformerTrainer::Create(IPUSystem* system,
                               const CharTransformerOptions& options) {
  RETURN_IF_ERROR(options.Validate());
  std::unique_ptr<CharTransformerTrainer> t(new CharTransformerTrainer());
  t->options_ = options;
  t->system_ = system;
  ASSIGN_OR_RETURN(t->corpus_, feeds::LoadCharCorpus(options.corpus));
  models::TransformerConfig config = options.model;
  config.vocab = t->corpus_.vocab_size();
  RETURN_IF_ERROR(config.Validate());
  const int64_t context = config.context;
  const uint64_t seed = static_cast<uint64_t>(options.seed);
  ASSIGN_OR_RETURN(t->train_feed_,
                   feeds::IPUInfeedQueue::Create(
                       feeds::CharWindows(t->corpus_.train, context, seed)
                           ->Batch(options.batch_size, /*drop_remainder=*/true)
                           ->Prefetch(4)));
  ASSIGN_OR_RETURN(
      t->eval_feed_,
      feeds::IPUInfeedQueue::Create(
          feeds::CharWindows(t->corpus_.validation, context, seed + 1)
              ->Batch(options.batch_size, /*drop_remainder=*/true)));
  ASSIGN_OR_RETURN(t->train_out_, feeds::IPUOutfeedQueue::Create());
  ASSIGN_OR_RETURN(t->eval_out_, feeds::IPUOutfeedQueue::Create());

  Scope& root = t->root_;
  t->params_ = models::CreateTransformerParams(root.NewSubScope("gpt"), config,
                                               options.seed);
  // AdamW as nanoGPT configures it (betas 0.9 / beta2, weight decay; here
  // on every variable), replicas averaging their gradients.
  auto adamw = std::make_shared<optimizers::AdamWOptimizer>(
      options.learning_rate, options.weight_decay, 0.9f, options.beta2);
  auto cross_replica =
      std::make_shared<optimizers::CrossReplicaOptimizer>(adamw.get());
  t->optimizers_ = {adamw, cross_replica};
  optimizers::Optimizer& optimizer = *cross_replica;
  const models::TransformerParams& params = t->params_;
  ASSIGN_OR_RETURN(t->train_loop_,
                   loops::Repeat(
                       root.NewSubScope("train"), options.device_iterations,
                       [&](const Scope& s, const std::vector<Output>& batch) {
                         Output logits = models::TransformerLogits(
                             s, params, batch[0], options.seed);
                         Output loss =
                             models::TransformerLoss(s, logits, batch[1]);
                         optimizer.Minimize(s, loss);
                         t->train_out_->Enqueue(s, {{"loss", loss}});
                         return std::vector<Output>{};
                       },
                       {}, t->train_feed_.get()));
  // Evaluation and sampling read the same variables without dropout.
  models::TransformerParams eval_params = params;
  eval_params.config.dropout = 0;
  ASSIGN_OR_RETURN(
      t->eval_loop_,
      loops::Repeat(
          root.NewSubScope("eval"), options.eval_batches,
          [&](const Scope& s, const std::vector<Output>& batch) {
            Output logits = models::TransformerLogits(s, eval_params, batch[0]);
            t->eval_out_->Enqueue(
                s, {{"loss", models::TransformerLoss(s, logits, batch[1])}});
            return std::vector<Output>{};
          },
          {}, t->eval_feed_.get()));
  const Scope sample = root.NewSubScope("sample");
  t->sample_inputs_ = ops::Placeholder(sample, DType::kInt32, {1, context});
  t->sample_logits_ =
      models::TransformerLogits(sample, eval_params, t->sample_inputs_);
  RETURN_IF_ERROR(root.status());
  t->strategy_ = std::make_unique<IPUStrategy>(system);
  return t;
}

absl::StatusOr<double> CharTransformerTrainer::Evaluate() {
  RETURN_IF_ERROR(strategy_->Run(*root_.graph(), {}, {eval_loop_.op}).status());
  ASSIGN_OR_RETURN(feeds::OutfeedResult out, eval_out_->Dequeue());
  const Tensor& losses = out["loss"];
  double sum = 0;
  for (float l : losses.span<float>()) sum += l;
  return sum / static_cast<double>(losses.NumElements());
}

absl::StatusOr<CharTransformerReport> CharTransformerTrainer::Train(
    const StepCallback& on_step, const EvalCallback& on_eval) {
  if (!initialized_) {
    RETURN_IF_ERROR(strategy_->Initialize(*root_.graph()));
    initialized_ = true;
  }
  const int64_t iters = options_.device_iterations;
  const int64_t runs = (options_.steps + iters - 1) / iters;
  const int64_t steps = runs * iters;
  const int64_t eval_runs =
      std::max<int64_t>(1, (options_.eval_every + iters - 1) / iters);
  CharTransformerReport report;
  report.steps = steps;
  report.parameters = models::TransformerParameterCount(params_.config);
  auto evaluate = [&](int64_t step) -> absl::Status {
    ASSIGN_OR_RETURN(double loss, Evaluate());
    report.validation.push_back({step, loss});
    if (on_eval) on_eval(step, loss);
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(evaluate(0));
  OutfeedMonitor monitor(train_out_.get(), steps, /*replicas=*/1, "loss", "",
                         /*window=*/50,
                         [&](int64_t done, int64_t total, float loss, float) {
                           if (on_step) on_step(done, total, loss);
                         });
  absl::Status status;
  double train_seconds = 0;
  for (int64_t r = 0; r < runs && status.ok(); ++r) {
    const auto start = std::chrono::steady_clock::now();
    status = strategy_->Run(*root_.graph(), {}, {train_loop_.op}).status();
    train_seconds += SecondsSince(start);
    if (status.ok() && ((r + 1) % eval_runs == 0 || r + 1 == runs)) {
      status = evaluate((r + 1) * iters);
    }
  }
  monitor.Stop();
  RETURN_IF_ERROR(status);
  report.final_loss = monitor.mean_loss();
  report.train_seconds = train_seconds;
  report.tokens_per_second = static_cast<double>(steps) * options_.batch_size *
                             params_.config.context /
                             std::max(train_seconds, 1e-9);
  return report;
}

absl::StatusOr<std::string> CharTransformerTrainer::Sample(
    const std::string& prompt, int length, const SampleOptions& options) {
  if (!(options.temperature > 0) || options.top_k < 0 || length < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Sample: temperature ", options.temperature, " must be > 0, top_k ",
        options.top_k, " and length ", length, " >= 0"));
  }
  if (prompt.empty()) {
    return absl::InvalidArgumentError("Sample: the prompt is empty");
  }
  if (!initialized_) {
    RETURN_IF_ERROR(strategy_->Initialize(*root_.graph()));
    initialized_ = true;
  }
  ASSIGN_OR_RETURN(std::vector<int32_t> ids, corpus_.Encode(prompt));
  const int64_t context = params_.config.context;
  const int vocab = corpus_.vocab_size();
  std::mt19937_64 rng(options.seed);
  std::string out;
  Tensor window(DType::kInt32, TensorShape({1, context}));
  std::vector<double> p(vocab);
  for (int n = 0; n < length; ++n) {
    // The last `context` ids at the window's start; the causal model's
    // prediction at the last of them does not see the padding after it.
    const int64_t used =
        std::min<int64_t>(context, static_cast<int64_t>(ids.size()));
    int32_t* w = window.data<int32_t>();
    std::fill(w, w + context, 0);
    std::copy(ids.end() - used, ids.end(), w);
    ASSIGN_OR_RETURN(std::vector<Tensor> logits,
                     strategy_->Run(*root_.graph(), {sample_logits_}, {},
                                    {{sample_inputs_, window}}));
    const float* row = logits[0].data<float>() + (used - 1) * vocab;
    // Softmax of logits / temperature over the top_k largest.
    float kth = -INFINITY;
    if (options.top_k > 0 && options.top_k < vocab) {
      std::vector<float> sorted(row, row + vocab);
      std::nth_element(sorted.begin(), sorted.begin() + (options.top_k - 1),
                       sorted.end(), std::greater<float>());
      kth = sorted[options.top_k - 1];
    }
    const float top = *std::max_element(row, row + vocab);
    for (int v = 0; v < vocab; ++v) {
      p[v] =
          row[v] < kth ? 0.0 : std::exp((row[v] - top) / options.temperature);
    }
    std::discrete_distribution<int> pick(p.begin(), p.end());
    const int32_t next = pick(rng);
    ids.push_back(next);
    out.push_back(corpus_.vocab[next]);
  }
  return out;
}

}  // namespace ipuflow::examples
