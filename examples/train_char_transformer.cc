// Trains a GPT-style character transformer (examples/transformer_model.h)
// on the text of Debian's fortunes package in a device loop on one emulated
// IPU, with nanoGPT's CPU configuration as the default (4 layers, 128 wide,
// 4 heads, context 64, batch 12, 2000 steps, AdamW 1e-3): a progress line
// with the training loss and tokens/s, the validation loss every
// --eval-every steps, then text sampled from the model. --pipeline-ipus=4
// pipelines it over four IPUs as Graphcore pipelines BERT.
//
//   ./bazelw run //examples:train_char_transformer
//   ./bazelw run //examples:train_char_transformer -- --steps=500 --layers=2
//   ./bazelw run //examples:train_char_transformer -- --pipeline-ipus=4
#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "core/command_line.h"
#include "core/machine_info.h"
#include "examples/char_transformer_training.h"

ABSL_FLAG(int64_t, steps, 2000, "training steps");
ABSL_FLAG(int, batch, 12, "windows per training step");
ABSL_FLAG(int64_t, context, 64, "characters a prediction sees");
ABSL_FLAG(int64_t, layers, 4, "transformer blocks");
ABSL_FLAG(int64_t, width, 128, "model width");
ABSL_FLAG(int64_t, heads, 4, "attention heads (divide --width)");
ABSL_FLAG(double, dropout, 0.0, "dropout rate in [0, 1)");
ABSL_FLAG(std::string, optimizer, "adamw", "adamw or lamb");
ABSL_FLAG(double, learning_rate, 1e-3, "the optimizer's learning rate");
ABSL_FLAG(int, device_iterations, 50, "training steps per device-loop run");
ABSL_FLAG(int64_t, eval_every, 250, "steps between validation losses");
ABSL_FLAG(int, eval_batches, 20, "held-out batches per validation loss");
ABSL_FLAG(int64_t, seed, 1, "seed of the weights and the data order");
ABSL_FLAG(int, sample, 300, "characters to sample at the end (0: none)");
ABSL_FLAG(double, temperature, 0.8, "sampling temperature");
ABSL_FLAG(int, top_k, 20, "sample from the k likeliest characters (0: all)");
ABSL_FLAG(std::string, corpus_dir, ipuflow::feeds::kFortunesDir,
          "directory of text files");
ABSL_FLAG(int, pipeline_ipus, 0,
          "0: a device loop on one IPU; N: pipelined over N IPUs as BERT is "
          "(embedding and tied head on IPU 0, blocks over the others)");
ABSL_FLAG(int, micro_batches, 6,
          "pipelined: micro-batches per update (divides --batch)");

int main(int argc, char** argv) {
  using namespace ipuflow;
  absl::SetProgramUsageMessage(
      "Trains a character-level transformer on the fortunes text.");
  ParseCommandLine(argc, argv);

  examples::CharTransformerOptions o;
  o.steps = absl::GetFlag(FLAGS_steps);
  o.batch_size = absl::GetFlag(FLAGS_batch);
  o.model.context = absl::GetFlag(FLAGS_context);
  o.model.layers = absl::GetFlag(FLAGS_layers);
  o.model.width = absl::GetFlag(FLAGS_width);
  o.model.heads = absl::GetFlag(FLAGS_heads);
  o.model.dropout = static_cast<float>(absl::GetFlag(FLAGS_dropout));
  absl::StatusOr<examples::TransformerOptimizer> optimizer =
      examples::TransformerOptimizerFromName(absl::GetFlag(FLAGS_optimizer));
  if (!optimizer.ok()) {
    std::fprintf(stderr, "--optimizer: %s\n",
                 optimizer.status().ToString().c_str());
    return 1;
  }
  o.optimizer = *optimizer;
  o.learning_rate = static_cast<float>(absl::GetFlag(FLAGS_learning_rate));
  o.device_iterations = absl::GetFlag(FLAGS_device_iterations);
  o.eval_every = absl::GetFlag(FLAGS_eval_every);
  o.eval_batches = absl::GetFlag(FLAGS_eval_batches);
  o.seed = absl::GetFlag(FLAGS_seed);
  o.corpus.dir = absl::GetFlag(FLAGS_corpus_dir);
  o.pipeline_ipus = absl::GetFlag(FLAGS_pipeline_ipus);
  o.micro_batches = absl::GetFlag(FLAGS_micro_batches);

  IPUConfig config;
  if (o.pipeline_ipus > 0) {
    config.set_auto_select_ipus(o.pipeline_ipus);
    config.set_allow_recompute(true);  // The blocks' checkpoints.
  }
  absl::StatusOr<std::unique_ptr<IPUSystem>> system = IPUSystem::Create(config);
  if (!system.ok()) {
    std::fprintf(stderr, "%s\n", system.status().ToString().c_str());
    return 1;
  }
  absl::StatusOr<std::unique_ptr<examples::CharTransformerTrainer>> trainer =
      examples::CharTransformerTrainer::Create(system->get(), o);
  if (!trainer.ok()) {
    std::fprintf(stderr, "%s\n", trainer.status().ToString().c_str());
    return 1;
  }
  const models::TransformerConfig& c = (*trainer)->config();
  const feeds::CharCorpus& corpus = (*trainer)->corpus();
  std::printf("Machine: %s\n", MachineDescription().c_str());
  std::printf(
      "Corpus: %lld characters of %zu files, vocabulary %d; %lld for "
      "training, %lld held out\n",
      static_cast<long long>(corpus.num_chars), corpus.files.size(),
      corpus.vocab_size(), static_cast<long long>(corpus.train.NumElements()),
      static_cast<long long>(corpus.validation.NumElements()));
  std::printf(
      "Model: %lld layers, width %lld, %lld heads, context %lld, %lld "
      "parameters; %lld steps of %d windows, %s %g\n",
      static_cast<long long>(c.layers), static_cast<long long>(c.width),
      static_cast<long long>(c.heads), static_cast<long long>(c.context),
      static_cast<long long>(models::TransformerParameterCount(c)),
      static_cast<long long>(o.steps), o.batch_size,
      examples::TransformerOptimizerName(o.optimizer), o.learning_rate);
  std::fflush(stdout);
  absl::StatusOr<examples::CharTransformerReport> report = (*trainer)->Train(
      [](int64_t step, int64_t steps, float loss) {
        if (step % 50 == 0 || step == steps) {
          std::printf("step %lld/%lld  loss %.4f\n",
                      static_cast<long long>(step),
                      static_cast<long long>(steps), loss);
          std::fflush(stdout);
        }
      },
      [](int64_t step, double loss) {
        std::printf("step %lld  validation loss %.4f\n",
                    static_cast<long long>(step), loss);
        std::fflush(stdout);
      });
  if (!report.ok()) {
    std::fprintf(stderr, "\n%s\n", report.status().ToString().c_str());
    return 1;
  }
  std::printf(
      "Trained %lld steps in %.1f s (%.0f tokens/s); training loss (mean of "
      "50 steps) %.4f, validation loss %.4f\n",
      static_cast<long long>(report->steps), report->train_seconds,
      report->tokens_per_second, report->final_loss,
      report->validation.back().second);
  if (!report->pipeline_summary.empty()) {
    std::printf("%s\n", report->pipeline_summary.c_str());
  }
  const int length = absl::GetFlag(FLAGS_sample);
  if (length > 0) {
    examples::SampleOptions s;
    s.temperature = static_cast<float>(absl::GetFlag(FLAGS_temperature));
    s.top_k = absl::GetFlag(FLAGS_top_k);
    s.seed = static_cast<uint64_t>(o.seed);
    absl::StatusOr<std::string> text = (*trainer)->Sample("\n", length, s);
    if (!text.ok()) {
      std::fprintf(stderr, "%s\n", text.status().ToString().c_str());
      return 1;
    }
    std::printf("Sampled (temperature %g, top-k %d):\n%s\n", s.temperature,
                s.top_k, text->c_str());
  }
  return 0;
}
