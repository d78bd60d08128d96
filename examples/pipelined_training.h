// The PopTorch pipelining tutorial in C++: the ConvNet split in four blocks
// B1-B4 (pipelining::BlockModel), one per emulated IPU, staged by IPU under
// PipelinedExecution or ShardedExecution, trained on Fashion-MNIST with a
// pipeline (AdamW, gradient accumulation) and then evaluated with an
// inference pipeline. The example binary and its test share this code.
//
//   PipelinedTrainingOptions o;             // the tutorial's defaults
//   ASSIGN_OR_RETURN(PipelinedTrainingReport r,
//                    TrainPipelinedFashionMnist(system, o, DrawProgress));
//   r.test_accuracy;  r.train_images_per_second;  r.last_run.Summary();
//
// Batching as in PopTorch: each host call (one Pipeline::Run) consumes
// device_iterations x gradient_accumulation micro-batches of batch_size
// images; the weights are updated once per gradient_accumulation
// micro-batches (the mean of their gradients, PopTorch's default reduction),
// so the effective batch is batch_size x gradient_accumulation. Inference
// runs test_device_iterations micro-batches of test_batch_size per call;
// like poptorch.DataLoader (drop_last), a final partial call is dropped.
#ifndef IPUFLOW_EXAMPLES_PIPELINED_TRAINING_H_
#define IPUFLOW_EXAMPLES_PIPELINED_TRAINING_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "core/ipu/ipu_system.h"
#include "pipelining/pipeline_report.h"

namespace ipuflow::examples {

struct PipelinedTrainingOptions {
  int batch_size = 40;
  int device_iterations = 10;
  int gradient_accumulation = 10;
  int test_batch_size = 8;
  int test_device_iterations = 100;
  int epochs = 1;
  float learning_rate = 0.001f;  // AdamW.
  // "pipelined" (PipelinedExecution: the Grouped schedule) or "sharded"
  // (ShardedExecution: one IPU busy at a time, the Sequential schedule).
  std::string strategy = "pipelined";
  bool offload_optimiser = false;
  int64_t train_limit = -1;  // First N training images (-1: all 60000).
  int64_t test_limit = -1;   // First N test images (-1: all 10000).
  int64_t seed = 0;          // Initial weights and shuffle order.
};

struct PipelinedTrainingReport {
  int64_t micro_batches = 0;   // Trained.
  int64_t weight_updates = 0;
  double train_seconds = 0;    // Wall clock, all training runs.
  double train_images_per_second = 0;
  double final_loss = 0;       // Mean of the last 50 micro-batches.
  double train_accuracy = 0;   // Mean of the last 50 micro-batches.
  double test_accuracy = 0;
  int64_t test_images = 0;
  double test_images_per_second = 0;
  pipelining::PipelineReport last_run;   // The last training call.
  pipelining::PipelineReport test_run;   // The last inference call.
  std::string memory_report;             // Training pipeline, per IPU.
};

// Called from the monitoring thread after every micro-batch with (done,
// total, loss, running accuracy).
using ProgressCallback = std::function<void(int64_t, int64_t, float, float)>;

absl::StatusOr<PipelinedTrainingReport> TrainPipelinedFashionMnist(
    IPUSystem* system, const PipelinedTrainingOptions& options,
    const ProgressCallback& on_progress = nullptr);

}  // namespace ipuflow::examples

#endif  // IPUFLOW_EXAMPLES_PIPELINED_TRAINING_H_
