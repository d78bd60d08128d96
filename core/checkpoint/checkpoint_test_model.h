// The small training run the exact-resume tests checkpoint (training_state_
// test, tests/distributed/mpi_checkpoint_check): a device loop whose body
// is a float16 matmul, dropout and a squared error, trained by Adam with
// float32 master weights inside cross-replica gradient accumulation inside
// GradScaler loss scaling, with stochastic rounding, fed by an Async
// DataLoader with 2 workers shuffling. Built the same way every time: from
// scratch, or from a checkpoint (the input first, then Restore after
// Initialize), so two runs differ only by what the checkpoint carries.
#ifndef IPUFLOW_CORE_CHECKPOINT_CHECKPOINT_TEST_MODEL_H_
#define IPUFLOW_CORE_CHECKPOINT_CHECKPOINT_TEST_MODEL_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/checkpoint/training_state.h"
#include "core/ipu/ipu_strategy.h"
#include "core/ipu/process_link.h"
#include "feeds/data_loader.h"
#include "feeds/infeed_queue.h"
#include "feeds/outfeed_queue.h"
#include "feeds/resume_input.h"
#include "optimizers/adam.h"
#include "optimizers/gradient_accumulation.h"
#include "optimizers/loss_scaling.h"

namespace ipuflow::checkpoint::testing {

inline constexpr int64_t kBatch = 2;

// `samples` samples; sample i: x = 4 features of i, y = a target of i,
// id = i.
feeds::DatasetPtr Samples(int64_t samples);

// What a test run is fed and writes to: the DataLoader over `samples` with
// `options` (resumed from `resume`'s positions when given), an infeed
// repeating its micro-batches, and an outfeed.
struct TrainingFeeds {
  std::unique_ptr<feeds::DataLoader> loader;
  std::unique_ptr<feeds::IPUInfeedQueue> infeed;
  std::unique_ptr<feeds::IPUOutfeedQueue> outfeed;
};
absl::StatusOr<TrainingFeeds> MakeTrainingFeeds(
    const CheckpointContents* resume, feeds::DatasetPtr samples,
    const feeds::DataLoaderOptions& options);

struct RunConfig {
  int replicas = 2;  // This process's.
  int64_t samples = 48;
  bool stochastic_rounding = true;
  int accumulation = 2;     // Loop iterations per Execute = one weight update.
  int loop_iterations = 0;  // 0: accumulation.
  int loader_accumulation = 0;  // 0: accumulation.
  int variable_width = 3;
  bool extra_variable = false;
  bool offload_sharded = true;  // Adam's state in remote memory, sharded.
  // Not null: this process's link of a multi-process run (the IPU system
  // and the DataLoader's share of the samples).
  std::shared_ptr<ProcessLink> link;
  bool restore = true;  // With a checkpoint: restore it (else the input only).
};

class TrainingRun {
 public:
  // `resume` may be null (a run from scratch); status() says how it went.
  TrainingRun(const RunConfig& cfg, const CheckpointContents* resume);
  ~TrainingRun();

  const absl::Status& status() const { return status_; }
  TrainingCheckpoint& ckpt() { return *ckpt_; }
  DeviceProgram* exe() { return exe_; }

  // n weight updates; appends each one's losses and sample ids.
  absl::Status Train(int n);
  std::map<std::string, std::vector<Tensor>> Variables();

  std::vector<float> losses;
  std::vector<int32_t> ids;

 private:
  void Build(const RunConfig& cfg, const CheckpointContents* resume);

  optimizers::AdamOptimizer adam_;
  optimizers::CrossReplicaGradientAccumulationOptimizerV2 ga_;
  optimizers::LossScalingOptimizer ls_;
  std::unique_ptr<IPUSystem> system_;
  std::unique_ptr<feeds::DataLoader> loader_;
  std::unique_ptr<feeds::IPUInfeedQueue> infeed_;
  std::unique_ptr<feeds::IPUOutfeedQueue> outfeed_;
  Graph* graph_ = nullptr;
  std::unique_ptr<Scope> scope_;
  std::unique_ptr<IPUStrategy> strategy_;
  DeviceProgram* exe_ = nullptr;
  std::unique_ptr<TrainingCheckpoint> ckpt_;
  absl::Status status_;
};

// One Execute of `exe` (one training call) and the outfeed element it
// produced: appends its `loss` values to `losses` and its `id` values to
// `ids`.
absl::Status ExecuteAndRecord(DeviceProgram* exe,
                              feeds::IPUOutfeedQueue* outfeed,
                              const std::string& loss, const std::string& id,
                              std::vector<float>* losses,
                              std::vector<int32_t>* ids);

// Every variable of `a` and `b` (ReadVariables: per replica) has the same
// bytes; failures name `what`, the variable and the replica.
void ExpectBitwise(const std::map<std::string, std::vector<Tensor>>& a,
                   const std::map<std::string, std::vector<Tensor>>& b,
                   const std::string& what);

}  // namespace ipuflow::checkpoint::testing

#endif  // IPUFLOW_CORE_CHECKPOINT_CHECKPOINT_TEST_MODEL_H_
