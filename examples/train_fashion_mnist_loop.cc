// Trains the seed tutorial's ConvNet (or a small MLP) on Fashion-MNIST
// without pipelining: the whole training step on one IPU (or replicated over
// --ipus), in a device loop of --device-iterations steps fed by an infeed; a
// monitoring thread reads each step's loss and accuracy from an outfeed and
// draws the progress bar. The pipelined tutorial is train_fashion_mnist.
//
//   ./bazelw run //examples:train_fashion_mnist_loop -- --epochs=1
//   --batch-size=40
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "core/command_line.h"
#include "examples/fashion_mnist_training.h"
#include "examples/tutorial_support.h"

ABSL_FLAG(std::string, model, "conv", "conv (the tutorial ConvNet) or mlp");
ABSL_FLAG(int, batch_size, 40, "training batch size");
ABSL_FLAG(int, device_iterations, 10, "training steps per device-loop run");
ABSL_FLAG(int, test_batch_size, 40, "evaluation batch size");
ABSL_FLAG(int, epochs, 1, "passes over the training set");
ABSL_FLAG(double, learning_rate, 0.001, "AdamW learning rate");
ABSL_FLAG(int64_t, train_limit, -1, "use only the first N training images");
ABSL_FLAG(int, ipus, 1, "emulated IPUs (replicas of the training step)");

int main(int argc, char** argv) {
  using namespace ipuflow;
  absl::SetProgramUsageMessage("Trains the tutorial ConvNet on Fashion-MNIST.");
  ParseCommandLine(argc, argv);

  examples::TrainingOptions options;
  options.model = absl::GetFlag(FLAGS_model);
  options.batch_size = absl::GetFlag(FLAGS_batch_size);
  options.device_iterations = absl::GetFlag(FLAGS_device_iterations);
  options.test_batch_size = absl::GetFlag(FLAGS_test_batch_size);
  options.epochs = absl::GetFlag(FLAGS_epochs);
  options.learning_rate =
      static_cast<float>(absl::GetFlag(FLAGS_learning_rate));
  options.train_limit = absl::GetFlag(FLAGS_train_limit);

  IPUConfig config;
  config.set_auto_select_ipus(absl::GetFlag(FLAGS_ipus));
  absl::StatusOr<std::unique_ptr<IPUSystem>> system = IPUSystem::Create(config);
  if (!system.ok()) {
    std::fprintf(stderr, "%s\n", system.status().ToString().c_str());
    return 1;
  }
  std::printf(
      "Training %s on Fashion-MNIST: batch %d, %d device iterations, "
      "%d epoch(s), AdamW lr %g\n",
      options.model.c_str(), options.batch_size, options.device_iterations,
      options.epochs, options.learning_rate);
  std::fflush(stdout);
  absl::StatusOr<examples::TrainingReport> report = examples::TrainFashionMnist(
      system->get(), options, examples::DrawProgress);
  if (!report.ok()) {
    std::fprintf(stderr, "\n%s\n", report.status().ToString().c_str());
    return 1;
  }
  std::printf(
      "Trained %lld steps in %.1f s (%.0f images/s); last 50 steps: "
      "loss %.4f, accuracy %.2f%%\n",
      static_cast<long long>(report->steps), report->train_seconds,
      report->train_images_per_second, report->final_loss,
      100 * report->train_accuracy);
  std::printf("Test accuracy: %.2f%%\n", 100 * report->test_accuracy);
  std::printf("%s", (*system)->TransferReport().c_str());
  return 0;
}
