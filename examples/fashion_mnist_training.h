// Training and evaluating the tutorial ConvNet (or the small dense network)
// on Fashion-MNIST, on the emulated IPU system: the training step runs in a
// device loop (Repeat(device_iterations)) fed by an infeed, and each step's
// loss and accuracy stream back through an outfeed to a monitoring thread
// (OutfeedMonitor, shared with train_fashion_mnist). On a system of R IPUs
// the loop runs as R replicas: each step trains one batch per replica, the
// gradients averaged over them (CrossReplicaOptimizer), and the test split
// is shared between them. The example binary and its test share this code.
#ifndef IPUFLOW_EXAMPLES_FASHION_MNIST_TRAINING_H_
#define IPUFLOW_EXAMPLES_FASHION_MNIST_TRAINING_H_

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "core/ipu/ipu_system.h"

namespace ipuflow::examples {

struct TrainingOptions {
  std::string model = "conv";  // "conv" (the tutorial ConvNet) or "mlp".
  int batch_size = 40;
  int device_iterations = 10;  // Training steps per device-loop run.
  int test_batch_size = 40;
  int epochs = 1;
  float learning_rate = 0.001f;  // AdamW.
  int64_t train_limit = -1;      // First N training images (-1: all 60000).
  int64_t test_limit = -1;       // First N test images (-1: all 10000).
};

struct TrainingReport {
  int64_t steps = 0;
  double final_loss = 0;      // Mean loss of the last 50 batches.
  double train_accuracy = 0;  // Mean accuracy of the last 50 batches.
  double test_accuracy = 0;
  double train_images_per_second = 0;
  double train_seconds = 0;
};

// Called from the monitoring thread after every step with (step, steps,
// loss, running accuracy); loss and accuracy are means over the replicas.
using StepCallback = std::function<void(int64_t, int64_t, float, float)>;

absl::StatusOr<TrainingReport> TrainFashionMnist(
    IPUSystem* system, const TrainingOptions& options,
    const StepCallback& on_step = nullptr);

}  // namespace ipuflow::examples

#endif  // IPUFLOW_EXAMPLES_FASHION_MNIST_TRAINING_H_
