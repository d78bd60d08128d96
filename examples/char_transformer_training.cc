#include "examples/char_transformer_training.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>

#include "absl/strings/str_cat.h"
#include "examples/tutorial_support.h"
#include "ops/array/const.h"
#include "ops/array/recomputation_checkpoint.h"
#include "optimizers/adamw.h"
#include "optimizers/cross_replica.h"
#include "optimizers/lamb.h"

namespace ipuflow::examples {

absl::StatusOr<TransformerOptimizer> TransformerOptimizerFromName(
    const std::string& name) {
  if (name == "adamw") return TransformerOptimizer::kAdamW;
  if (name == "lamb") return TransformerOptimizer::kLamb;
  return absl::InvalidArgumentError(absl::StrCat(
      "char transformer: optimizer '", name, "' is not adamw or lamb"));
}

const char* TransformerOptimizerName(TransformerOptimizer optimizer) {
  return optimizer == TransformerOptimizer::kLamb ? "LAMB" : "AdamW";
}

absl::Status CharTransformerOptions::Validate() const {
  auto bad = [](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat("char transformer: ", what));
  };
  if (batch_size < 1 || batch_size > 65536) {
    return bad(absl::StrCat("batch_size ", batch_size, " not in [1, 65536]"));
  }
  // Bounds that keep every product of them (micro-batch losses counted,
  // tokens) far inside an int64.
  constexpr int64_t kMaxCount = int64_t{1} << 30;
  if (steps < 1 || steps > kMaxCount || device_iterations < 1 ||
      device_iterations > kMaxCount || eval_every < 1 ||
      eval_every > kMaxCount || eval_batches < 1 || eval_batches > kMaxCount) {
    return bad(absl::StrCat("steps ", steps, ", device_iterations ",
                            device_iterations, ", eval_every ", eval_every,
                            " and eval_batches ", eval_batches,
                            " must be in [1, 2^30]"));
  }
  if (pipeline_ipus != 0) {
    if (pipeline_ipus < 2 || pipeline_ipus > model.layers + 1) {
      return bad(absl::StrCat(
          "pipeline_ipus ", pipeline_ipus,
          " must be 0 or in [2, layers + 1 = ", model.layers + 1, "]"));
    }
    if (micro_batches < pipeline_ipus + 1 || batch_size % micro_batches != 0) {
      return bad(absl::StrCat("micro_batches ", micro_batches,
                              " must divide batch_size ", batch_size,
                              " and be at least ", pipeline_ipus + 1,
                              " (the Grouped schedule's minimum for its ",
                              pipeline_ipus + 1, " stages)"));
    }
  }
  if (optimizer != TransformerOptimizer::kAdamW &&
      optimizer != TransformerOptimizer::kLamb) {
    return bad(absl::StrCat("optimizer ", static_cast<int>(optimizer),
                            " is not kAdamW or kLamb"));
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
  const bool pipelined = options.pipeline_ipus > 0;
  const int ipus = pipelined ? options.pipeline_ipus : 1;
  if (system->num_ipus() != ipus) {
    return absl::FailedPreconditionError(absl::StrCat(
        "char transformer: ", pipelined ? "the pipeline" : "the device loop",
        " needs ", ipus, " IPU(s), the system has ", system->num_ipus()));
  }
  std::unique_ptr<CharTransformerTrainer> t(new CharTransformerTrainer());
  t->options_ = options;
  t->system_ = system;
  ASSIGN_OR_RETURN(t->corpus_, feeds::LoadCharCorpus(options.corpus));
  models::TransformerConfig config = options.model;
  config.vocab = t->corpus_.vocab_size();
  RETURN_IF_ERROR(config.Validate());
  const int64_t context = config.context;
  const uint64_t seed = static_cast<uint64_t>(options.seed);
  // Pipelined, the infeed gives micro-batches.
  const int feed_batch = pipelined ? options.batch_size / options.micro_batches
                                   : options.batch_size;
  ASSIGN_OR_RETURN(t->train_feed_,
                   feeds::IPUInfeedQueue::Create(
                       feeds::CharWindows(t->corpus_.train, context, seed)
                           ->Batch(feed_batch, /*drop_remainder=*/true)
                           ->Prefetch(4)));
  ASSIGN_OR_RETURN(
      t->eval_feed_,
      feeds::IPUInfeedQueue::Create(
          feeds::CharWindows(t->corpus_.validation, context, seed + 1)
              ->Batch(options.batch_size, /*drop_remainder=*/true)));
  ASSIGN_OR_RETURN(t->train_out_, feeds::IPUOutfeedQueue::Create());
  ASSIGN_OR_RETURN(t->eval_out_, feeds::IPUOutfeedQueue::Create());

  Scope& root = t->root_;
  // Pipelined, each variable lives on the IPU of the stages that read it:
  // the embedding and the tied head on IPU 0, block l on block_ipu(l).
  const int layers = static_cast<int>(config.layers);
  const int block_ipus = ipus - 1;
  auto block_ipu = [&](int l) { return 1 + l * block_ipus / layers; };
  std::vector<Scope> placed;
  if (pipelined) {
    placed.push_back(root.WithIpu(0));
    for (int l = 0; l < layers; ++l) {
      placed.push_back(root.WithIpu(block_ipu(l)));
    }
  }
  t->params_ = models::CreateTransformerParams(root.NewSubScope("gpt"), config,
                                               options.seed, placed);
  // AdamW as nanoGPT configures it (betas 0.9 / beta2, weight decay; here
  // on every variable), or LAMB with the same betas and decay; replicas
  // averaging their gradients.
  std::shared_ptr<optimizers::Optimizer> update;
  if (options.optimizer == TransformerOptimizer::kLamb) {
    update = std::make_shared<optimizers::LambOptimizer>(
        options.learning_rate, options.weight_decay, 0.9f, options.beta2);
  } else {
    update = std::make_shared<optimizers::AdamWOptimizer>(
        options.learning_rate, options.weight_decay, 0.9f, options.beta2);
  }
  auto cross_replica =
      std::make_shared<optimizers::CrossReplicaOptimizer>(update.get());
  t->optimizers_ = {update, cross_replica};
  const models::TransformerParams& params = t->params_;
  // The dropout streams of TransformerLogits, whichever way it is split.
  const int64_t streams = options.seed * 1000;
  if (pipelined) {
    // Stage 0: the embedding; then each of IPUs 1..N-1 its blocks, each
    // block's output a recomputation checkpoint; last: the tied head.
    using Args = std::vector<Output>;
    pipelining::PipelineOptions o;
    o.computational_stages.push_back(
        [&params, streams](const Scope& s, const Args& a) {
          return Args{models::TransformerEmbed(s, params, a[0], streams), a[1]};
        });
    o.device_mapping.push_back(0);
    for (int k = 1; k <= block_ipus; ++k) {
      std::vector<int> blocks;
      for (int l = 0; l < layers; ++l) {
        if (block_ipu(l) == k) blocks.push_back(l);
      }
      o.computational_stages.push_back(
          [&params, blocks, streams](const Scope& s, const Args& a) {
            Output x = a[0];
            for (int l : blocks) {
              x = ops::RecomputationCheckpoint(
                  s, models::TransformerBlock(s, params, l, x,
                                              streams + 10 * (l + 1)));
            }
            return Args{x, a[1]};
          });
      o.device_mapping.push_back(k);
    }
    o.computational_stages.push_back([&params](const Scope& s, const Args& a) {
      return Args{models::TransformerHead(s, params, a[0]), a[1]};
    });
    o.device_mapping.push_back(0);
    o.gradient_accumulation_count = options.micro_batches;
    o.repeat_count = options.device_iterations;
    o.pipeline_schedule = pipelining::PipelineSchedule::kGrouped;
    o.reduction_method = pipelining::ReductionMethod::kRunningMean;
    o.infeed_queue = t->train_feed_.get();
    o.outfeed_queue = t->train_out_.get();
    o.outfeed_loss = true;
    o.optimizer_function = [cross_replica](const Scope& s, const Args& out) {
      return pipelining::OptimizerFunctionOutput{
          cross_replica, models::TransformerLoss(s, out[0], out[1])};
    };
    ASSIGN_OR_RETURN(t->pipeline_, pipelining::Pipeline::Create(root, o));
  } else {
    ASSIGN_OR_RETURN(t->train_loop_,
                     loops::Repeat(
                         root.NewSubScope("train"), options.device_iterations,
                         [&](const Scope& s, const std::vector<Output>& batch) {
                           Output logits = models::TransformerLogits(
                               s, params, batch[0], options.seed);
                           Output loss =
                               models::TransformerLoss(s, logits, batch[1]);
                           cross_replica->Minimize(s, loss);
                           t->train_out_->Enqueue(s, {{"loss", loss}});
                           return std::vector<Output>{};
                         },
                         {}, t->train_feed_.get()));
  }
  // Evaluation and sampling read the same variables without dropout (as a
  // program sharded over the IPUs that hold them, when pipelined).
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

absl::Status CharTransformerTrainer::InitializeOnce() {
  if (initialized_) return absl::OkStatus();
  RETURN_IF_ERROR(strategy_->Initialize(*root_.graph()));
  initialized_ = true;
  return absl::OkStatus();
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
  RETURN_IF_ERROR(InitializeOnce());
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
  // Pipelined, every micro-batch's loss comes out: a step is micro_batches
  // of them, its loss their mean.
  const int per_step = pipeline_ != nullptr ? options_.micro_batches : 1;
  OutfeedMonitor monitor(
      train_out_.get(), steps * per_step, /*replicas=*/1, "loss", "",
      /*window=*/50 * per_step,
      [&, sum = 0.0](int64_t done, int64_t, float loss, float) mutable {
        sum += loss;
        if (done % per_step != 0) return;
        if (on_step) on_step(done / per_step, steps, sum / per_step);
        sum = 0;
      });
  auto train_run = [&]() -> absl::Status {
    if (pipeline_ == nullptr) {
      return strategy_->Run(*root_.graph(), {}, {train_loop_.op}).status();
    }
    ASSIGN_OR_RETURN(
        DeviceProgram * exe,
        strategy_->Compile(*root_.graph(), {}, {pipeline_->frame()}));
    std::vector<std::vector<Tensor>> results;
    return exe->Execute({{}}, &results);
  };
  absl::Status status;
  double train_seconds = 0;
  for (int64_t r = 0; r < runs && status.ok(); ++r) {
    const auto start = std::chrono::steady_clock::now();
    status = train_run();
    train_seconds += SecondsSince(start);
    if (status.ok() && ((r + 1) % eval_runs == 0 || r + 1 == runs)) {
      status = evaluate((r + 1) * iters);
    }
  }
  monitor.Stop();
  RETURN_IF_ERROR(status);
  report.final_loss = monitor.mean_loss();
  if (pipeline_ != nullptr && pipeline_->last_report().has_value()) {
    report.pipeline_summary = pipeline_->last_report()->Summary();
  }
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
  RETURN_IF_ERROR(InitializeOnce());
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
