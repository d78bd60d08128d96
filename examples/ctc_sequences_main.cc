// Trains a small convolutional model with CTC to read strips of 1 to 4
// Fashion-MNIST images placed side by side (their classes, 0..9, are the
// "digits"), on an emulated IPU: a device loop of --device-iterations Adam
// steps fed by a PopTorch-style DataLoader through an infeed, the losses
// back through an outfeed; then greedy (best-path) decoding of held-out
// strips built from the test images. See examples/ctc_sequences.h
// (PyTorch CTCLoss; Graves et al. 2006; PopTorch user guide, data loader).
//
//   ./bazelw run //examples:ctc_sequences -- --steps=4000 --batch=32
#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "core/command_line.h"
#include "examples/ctc_sequences.h"

ABSL_FLAG(int64_t, steps, 1000,
          "training steps (multiple of --device-iterations)");
ABSL_FLAG(int, batch, 32, "strips per training step");
ABSL_FLAG(int, device_iterations, 50, "training steps per device-loop run");
ABSL_FLAG(double, learning_rate, 4e-3, "Adam learning rate");
ABSL_FLAG(int64_t, train_sequences, 8000, "training strips to generate");
ABSL_FLAG(int64_t, eval_sequences, 1000, "held-out strips (test images)");
ABSL_FLAG(int64_t, train_images, 20000, "pool: first N training images");
ABSL_FLAG(int64_t, test_images, 5000, "pool: first N test images");
ABSL_FLAG(int64_t, seed, 1, "seed of the data, shuffling and weights");

int main(int argc, char** argv) {
  using namespace ipuflow;
  absl::SetProgramUsageMessage(
      "Trains a CTC sequence model on strips of Fashion-MNIST images.");
  ParseCommandLine(argc, argv);

  examples::CtcOptions o;
  o.steps = absl::GetFlag(FLAGS_steps);
  o.batch_size = absl::GetFlag(FLAGS_batch);
  o.device_iterations = absl::GetFlag(FLAGS_device_iterations);
  o.learning_rate = static_cast<float>(absl::GetFlag(FLAGS_learning_rate));
  o.train_sequences = absl::GetFlag(FLAGS_train_sequences);
  o.eval_sequences = absl::GetFlag(FLAGS_eval_sequences);
  o.train_images = absl::GetFlag(FLAGS_train_images);
  o.test_images = absl::GetFlag(FLAGS_test_images);
  o.seed = static_cast<uint64_t>(absl::GetFlag(FLAGS_seed));

  absl::StatusOr<std::unique_ptr<IPUSystem>> system =
      IPUSystem::Create(IPUConfig());
  if (!system.ok()) {
    std::fprintf(stderr, "%s\n", system.status().ToString().c_str());
    return 1;
  }
  std::printf(
      "CTC on strips of 1-4 Fashion-MNIST images (14x64, T=%d, "
      "C=%d): %lld steps of %d, Adam lr %g, %lld training strips\n",
      examples::kCtcTimeSteps, examples::kCtcClasses,
      static_cast<long long>(o.steps), o.batch_size, o.learning_rate,
      static_cast<long long>(o.train_sequences));
  std::fflush(stdout);
  absl::StatusOr<examples::CtcReport> report = examples::TrainCtcSequences(
      system->get(), o, [](int64_t step, int64_t steps, float loss) {
        if (step % 100 == 0 || step == steps) {
          std::printf("step %lld/%lld  CTC loss %.4f\n",
                      static_cast<long long>(step),
                      static_cast<long long>(steps), loss);
          std::fflush(stdout);
        }
      });
  if (!report.ok()) {
    std::fprintf(stderr, "\n%s\n", report.status().ToString().c_str());
    return 1;
  }
  std::printf(
      "Trained %lld steps in %.1f s; CTC loss (mean of 20 steps) "
      "%.4f -> %.4f\n",
      static_cast<long long>(report->steps), report->train_seconds,
      report->initial_loss, report->final_loss);
  std::printf("Held-out strips (truth -> greedy decoding):");
  for (const std::string& s : report->samples) std::printf("  %s", s.c_str());
  std::printf(
      "\nGreedy decoding on %lld held-out strips: sequence accuracy "
      "%.2f%%, character accuracy %.2f%%\n",
      static_cast<long long>(report->eval_sequences),
      100 * report->sequence_accuracy, 100 * report->character_accuracy);
  return 0;
}
