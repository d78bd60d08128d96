// outfeed_monitor: the seed's section 6.3 in C++. A small dense network
// trains on Fashion-MNIST in a device loop while a separate host thread
// dequeues each step's loss from the outfeed and prints it as it arrives.
//
//   ./bazelw run //examples:outfeed_monitor -- --train_limit=4000
#include <cstdio>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "examples/fashion_mnist_training.h"

ABSL_FLAG(int64_t, train_limit, 4000, "use only the first N training images");
ABSL_FLAG(int, device_iterations, 25, "training steps per device-loop run");

int main(int argc, char** argv) {
  using namespace ipuflow;
  absl::ParseCommandLine(argc, argv);
  auto system = IPUSystem::Create(IPUConfig());
  if (!system.ok()) {
    std::fprintf(stderr, "%s\n", system.status().ToString().c_str());
    return 1;
  }
  examples::TrainingOptions options;
  options.model = "mlp";
  options.batch_size = 32;
  options.device_iterations = absl::GetFlag(FLAGS_device_iterations);
  options.train_limit = absl::GetFlag(FLAGS_train_limit);
  options.test_limit = 2000;
  // Runs on the monitoring thread, once per step, while the device trains.
  auto print_loss = [](int64_t step, int64_t steps, float loss, float) {
    std::printf("step %4lld/%lld  loss %.4f\n", static_cast<long long>(step),
                static_cast<long long>(steps), loss);
  };
  auto report = examples::TrainFashionMnist(system->get(), options, print_loss);
  if (!report.ok()) {
    std::fprintf(stderr, "%s\n", report.status().ToString().c_str());
    return 1;
  }
  std::printf("test accuracy %.2f%%\n", 100 * report->test_accuracy);
  return 0;
}
