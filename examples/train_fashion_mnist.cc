// The README's main example: the PopTorch pipelining tutorial in C++. The
// ConvNet is split in four blocks B1-B4, one per emulated IPU, trained on
// Fashion-MNIST by a pipeline (AdamW, gradient accumulation), then evaluated
// by an inference pipeline.
//
//   ./bazelw run //examples:train_fashion_mnist
//   ./bazelw run //examples:train_fashion_mnist -- --strategy=sharded
//   ./bazelw run //examples:train_fashion_mnist -- --profile --profile-dir=prof
//
// --profile writes, for the last training call (device_iterations pipeline
// runs): train_trace.json (open in ui.perfetto.dev), train_timeline.svg, and
// the same for the last inference call, plus summary.txt.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "core/command_line.h"
#include "examples/pipelined_training.h"
#include "examples/progress_bar.h"
#include "pipelining/trace.h"

ABSL_FLAG(int, batch_size, 40, "micro-batch size for training");
ABSL_FLAG(int, device_iterations, 10,
          "weight updates per host call (pipeline runs per call)");
ABSL_FLAG(int, gradient_accumulation, 10,
          "micro-batches per weight update (the pipeline's "
          "gradient_accumulation_count)");
ABSL_FLAG(int, test_batch_size, 8, "micro-batch size for inference");
ABSL_FLAG(int, test_device_iterations, 100,
          "inference micro-batches per host call");
ABSL_FLAG(int, epochs, 1, "passes over the training set");
ABSL_FLAG(double, learning_rate, 0.001, "AdamW learning rate");
ABSL_FLAG(std::string, strategy, "pipelined",
          "pipelined (all IPUs busy: Grouped schedule) or sharded (one IPU "
          "at a time: Sequential schedule)");
ABSL_FLAG(bool, offload_optimiser, false,
          "keep AdamW's state in remote memory between weight updates");
ABSL_FLAG(bool, profile, false,
          "write the execution traces and timelines to --profile-dir");
ABSL_FLAG(std::string, profile_dir, "profile", "where --profile writes");
ABSL_FLAG(bool, debug, false,
          "print the per-IPU memory report and the pipeline summaries");
ABSL_FLAG(int64_t, train_limit, -1, "use only the first N training images");
ABSL_FLAG(int64_t, seed, 0, "initial weights and shuffle order");

namespace {

bool WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  return static_cast<bool>(out);
}

void WriteProfile(const std::string& dir,
                  const ipuflow::examples::PipelinedTrainingReport& r) {
  using namespace ipuflow::pipelining;
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  SvgOptions train_svg;
  train_svg.title = absl::StrCat("Training: ", r.last_run.repeats,
                                 " pipeline runs (virtual clocks)");
  SvgOptions test_svg;
  test_svg.title = "Inference (virtual clocks)";
  const bool ok =
      WriteFile(dir + "/train_trace.json", ToChromeTraceJson(r.last_run.items)) &&
      WriteFile(dir + "/train_trace_wall.json",
                ToChromeTraceJson(r.last_run.wall_items, "wall clock")) &&
      WriteFile(dir + "/train_timeline.svg",
                ToSvgTimeline(r.last_run.items, train_svg)) &&
      WriteFile(dir + "/test_trace.json", ToChromeTraceJson(r.test_run.items)) &&
      WriteFile(dir + "/test_timeline.svg",
                ToSvgTimeline(r.test_run.items, test_svg)) &&
      WriteFile(dir + "/summary.txt",
                absl::StrCat("Training (last call)\n", r.last_run.Summary(),
                             "\nInference (last call)\n", r.test_run.Summary(),
                             "\nMemory\n", r.memory_report));
  std::printf("%s profile to %s/ (train_trace.json, train_timeline.svg, "
              "test_trace.json, test_timeline.svg, summary.txt)\n",
              ok ? "Wrote the" : "Could not write the", dir.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  using namespace ipuflow;
  absl::SetProgramUsageMessage(
      "Trains the tutorial ConvNet on Fashion-MNIST, pipelined over four "
      "emulated IPUs.");
  ParseCommandLine(argc, argv);
  examples::PipelinedTrainingOptions o;
  o.batch_size = absl::GetFlag(FLAGS_batch_size);
  o.device_iterations = absl::GetFlag(FLAGS_device_iterations);
  o.gradient_accumulation = absl::GetFlag(FLAGS_gradient_accumulation);
  o.test_batch_size = absl::GetFlag(FLAGS_test_batch_size);
  o.test_device_iterations = absl::GetFlag(FLAGS_test_device_iterations);
  o.epochs = absl::GetFlag(FLAGS_epochs);
  o.learning_rate = static_cast<float>(absl::GetFlag(FLAGS_learning_rate));
  o.strategy = absl::GetFlag(FLAGS_strategy);
  o.offload_optimiser = absl::GetFlag(FLAGS_offload_optimiser);
  o.train_limit = absl::GetFlag(FLAGS_train_limit);
  o.seed = absl::GetFlag(FLAGS_seed);

  IPUConfig config;
  config.set_auto_select_ipus(4);
  absl::StatusOr<std::unique_ptr<IPUSystem>> system = IPUSystem::Create(config);
  if (!system.ok()) {
    std::fprintf(stderr, "%s\n", system.status().ToString().c_str());
    return 1;
  }
  std::printf(
      "Training the ConvNet (B1-B4 on IPUs 0-3, %s) on Fashion-MNIST: batch "
      "%d, gradient accumulation %d, %d device iterations, %d epoch(s), AdamW "
      "lr %g%s\n",
      o.strategy.c_str(), o.batch_size, o.gradient_accumulation,
      o.device_iterations, o.epochs, o.learning_rate,
      o.offload_optimiser ? ", optimizer state offloaded" : "");
  std::fflush(stdout);
  absl::StatusOr<examples::PipelinedTrainingReport> r =
      examples::TrainPipelinedFashionMnist(system->get(), o,
                                           examples::DrawProgress);
  if (!r.ok()) {
    std::fprintf(stderr, "\n%s\n", r.status().ToString().c_str());
    return 1;
  }
  const pipelining::PipelineReport& run = r->last_run;
  std::printf(
      "Trained %lld micro-batches (%lld weight updates) in %.1f s: %.0f "
      "images/s; last 50 micro-batches: loss %.4f, accuracy %.2f%%\n",
      static_cast<long long>(r->micro_batches),
      static_cast<long long>(r->weight_updates), r->train_seconds,
      r->train_images_per_second, r->final_loss, 100 * r->train_accuracy);
  std::printf("Pipeline (last call, virtual clocks): bubble %.1f%% (theory "
              "%.1f%%), utilisation",
              100 * run.bubble, 100 * run.theoretical_bubble);
  for (double u : run.ipu_utilisation) std::printf(" %.0f%%", 100 * u);
  std::printf("\n");
  std::printf("Test accuracy: %.2f%% (%lld images, %.0f images/s)\n",
              100 * r->test_accuracy, static_cast<long long>(r->test_images),
              r->test_images_per_second);
  if (absl::GetFlag(FLAGS_debug)) {
    std::printf("\nTraining pipeline, last call:\n%s\nInference pipeline, last "
                "call:\n%s\nMemory per IPU:\n%s",
                run.Summary().c_str(), r->test_run.Summary().c_str(),
                r->memory_report.c_str());
    std::printf("%s", (*system)->TransferReport().c_str());
  }
  if (absl::GetFlag(FLAGS_profile)) {
    WriteProfile(ResolveOutputPath(absl::GetFlag(FLAGS_profile_dir)), *r);
  }
  return 0;
}
