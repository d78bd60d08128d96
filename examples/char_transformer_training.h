// Training the character transformer (transformer_model.h) on the fortunes
// corpus (feeds/char_corpus.h): on one emulated IPU, the training step runs
// in a device loop (Repeat(device_iterations)) fed by an infeed of random
// windows; with pipeline_ipus, it is pipelined as Graphcore pipelines BERT
// (../shared/reference/ops_and_transformer.md, section 2): the embedding
// and the output head tied to it on IPU 0, the blocks spread over the other
// IPUs, a recomputation checkpoint after each block, the Grouped schedule
// and a running-mean accumulation of the micro-batches' gradients. Either
// way each loss streams out through an outfeed to a monitoring thread, an
// evaluation loop over held-out windows gives the validation loss, and a
// forward program samples text. The example binary (train_char_transformer)
// and its test share this code.
//
//   CharTransformerOptions options;   // nanoGPT's CPU configuration
//   ASSIGN_OR_RETURN(auto trainer,
//                    CharTransformerTrainer::Create(system.get(), options));
//   ASSIGN_OR_RETURN(CharTransformerReport report, trainer->Train(on_step));
//   ASSIGN_OR_RETURN(std::string text, trainer->Sample("\n", 200, {}));
#ifndef IPUFLOW_EXAMPLES_CHAR_TRANSFORMER_TRAINING_H_
#define IPUFLOW_EXAMPLES_CHAR_TRANSFORMER_TRAINING_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/ipu/ipu_strategy.h"
#include "core/ipu/ipu_system.h"
#include "examples/transformer_model.h"
#include "feeds/char_corpus.h"
#include "feeds/infeed_queue.h"
#include "feeds/outfeed_queue.h"
#include "ops/control/loops.h"
#include "pipelining/pipeline.h"

namespace ipuflow::optimizers {
class Optimizer;
}  // namespace ipuflow::optimizers

namespace ipuflow::examples {

// The weight update: AdamW as nanoGPT, or LAMB as Graphcore's BERT
// (optimizers/lamb.h: Adam with a per-variable trust ratio).
enum class TransformerOptimizer { kAdamW, kLamb };

// "adamw", "lamb"; InvalidArgument naming the value otherwise.
absl::StatusOr<TransformerOptimizer> TransformerOptimizerFromName(
    const std::string& name);
const char* TransformerOptimizerName(TransformerOptimizer optimizer);

struct CharTransformerOptions {
  // model.vocab is the corpus'. The defaults are nanoGPT's CPU
  // configuration (4 layers, 128 wide, 4 heads, context 64, batch 12,
  // 2000 iterations, no dropout, AdamW at 1e-3).
  models::TransformerConfig model;
  feeds::CharCorpusOptions corpus;
  int batch_size = 12;
  int64_t steps = 2000;
  int device_iterations = 50;  // Steps per device-loop run.
  TransformerOptimizer optimizer = TransformerOptimizer::kAdamW;
  float learning_rate = 1e-3f;
  float weight_decay = 0.1f;  // Decoupled (AdamW); in the update (LAMB).
  float beta2 = 0.99f;
  int64_t eval_every = 250;  // Steps; rounded up to whole loop runs.
  int eval_batches = 20;
  int64_t seed = 1;  // Initial weights, data order, dropout.
  // 0: a device loop on one IPU. N >= 2: pipelined over IPUs 0..N-1 (the
  // system needs exactly N), in updates of batch_size windows made of
  // micro_batches micro-batches (which must divide batch_size; at least
  // N + 1 for the Grouped schedule), device_iterations updates per run.
  int pipeline_ipus = 0;
  int micro_batches = 6;
  // InvalidArgument naming the first option out of range.
  absl::Status Validate() const;
};

struct CharTransformerReport {
  int64_t steps = 0;
  int64_t parameters = 0;
  double final_loss = 0;  // Mean training loss of the last 50 steps.
  // (step, mean loss over eval_batches held-out batches), at step 0, every
  // eval_every steps and at the end.
  std::vector<std::pair<int64_t, double>> validation;
  double tokens_per_second = 0;  // Training, outside evaluations.
  double train_seconds = 0;
  // Pipelined: the last run's report (timeline, bubble, memory per IPU).
  std::string pipeline_summary;
};

struct SampleOptions {
  float temperature = 1.0f;  // > 0.
  int top_k = 0;             // 0: every character.
  uint64_t seed = 0;
};

class CharTransformerTrainer {
 public:
  // Reads the corpus and builds the graph (variables initialised on the
  // first Train). `system` (one IPU is used) must outlive the trainer.
  static absl::StatusOr<std::unique_ptr<CharTransformerTrainer>> Create(
      IPUSystem* system, const CharTransformerOptions& options);
  ~CharTransformerTrainer();

  // Called from the monitoring thread after every step with (step, steps,
  // loss); from the caller's thread after every evaluation with (step,
  // validation loss).
  using StepCallback = std::function<void(int64_t, int64_t, float)>;
  using EvalCallback = std::function<void(int64_t, double)>;
  absl::StatusOr<CharTransformerReport> Train(
      const StepCallback& on_step = nullptr,
      const EvalCallback& on_eval = nullptr);
  // The mean loss of eval_batches held-out batches (the next ones of the
  // validation stream).
  absl::StatusOr<double> Evaluate();
  // `length` characters after `prompt` (whose bytes must be in the
  // vocabulary), drawn one at a time from the model's distribution over
  // the next character given at most `context` previous ones.
  absl::StatusOr<std::string> Sample(const std::string& prompt, int length,
                                     const SampleOptions& options);

  const feeds::CharCorpus& corpus() const { return corpus_; }
  const models::TransformerConfig& config() const { return params_.config; }

 private:
  CharTransformerTrainer() = default;
  // Runs the variables' initialisers on the first call only.
  absl::Status InitializeOnce();

  CharTransformerOptions options_;
  IPUSystem* system_ = nullptr;
  feeds::CharCorpus corpus_;
  std::shared_ptr<feeds::IPUInfeedQueue> train_feed_, eval_feed_;
  std::shared_ptr<feeds::IPUOutfeedQueue> train_out_, eval_out_;
  Scope root_ = Scope::NewRootScope();
  models::TransformerParams params_;
  loops::Loop train_loop_, eval_loop_;
  std::unique_ptr<pipelining::Pipeline> pipeline_;  // Pipelined only.
  Output sample_inputs_, sample_logits_;
  // The optimizer and its cross-replica wrapper, kept as long as the graph.
  std::vector<std::shared_ptr<optimizers::Optimizer>> optimizers_;
  std::unique_ptr<IPUStrategy> strategy_;
  bool initialized_ = false;
};

}  // namespace ipuflow::examples

#endif  // IPUFLOW_EXAMPLES_CHAR_TRANSFORMER_TRAINING_H_
