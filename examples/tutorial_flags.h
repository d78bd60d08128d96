// The main example's command line (examples/train_fashion_mnist.cc): its
// flags, their defaults (the PopTorch pipelining tutorial's
// hyperparameters) and their checks, parsed into one struct; what it
// prints from them is examples/tutorial_reports.h.
//
//   ASSIGN_OR_RETURN(examples::TutorialFlags flags,
//                    examples::ParseTutorialFlags(argc, argv));
//   flags.batch_size;                 // 40
//   flags.gradient_accumulation;      // 10 / --replication-factor
//
// Separate from tutorial_support (shared with train_fashion_mnist_loop,
// which defines flags of the same names).
#ifndef IPUFLOW_EXAMPLES_TUTORIAL_FLAGS_H_
#define IPUFLOW_EXAMPLES_TUTORIAL_FLAGS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/ipu/executable.h"
#include "core/ipu/ipu_config.pb.h"
#include "examples/tutorial_support.h"
#include "feeds/data_loader.h"
#include "optimizers/loss_scaling.h"
#include "pipelining/pipeline.h"

namespace ipuflow::examples {

constexpr int kStages = 4;  // B1-B4, one per IPU.

struct TutorialFlags {
  // Training: micro-batch, weight updates per host call, micro-batches per
  // weight update on each replica (resolved: 10 / (replicas x processes)
  // by default).
  int batch_size = 40;
  int device_iterations = 10;
  int gradient_accumulation = 10;
  int replicas = 1;   // Of this process.
  int processes = 1;  // Not a flag: how many mpirun started.
  // Inference: micro-batch, micro-batches per replica per host call.
  int test_batch_size = 8;
  int test_iterations = 100;
  int epochs = 1;
  float learning_rate = 0.001f;
  std::string strategy = "pipelined";  // Or "sharded".
  // The training pipeline's schedule when pipelined (--schedule).
  pipelining::PipelineSchedule schedule =
      pipelining::PipelineSchedule::kGrouped;
  bool offload_optimiser = false;
  bool replicated_optimizer_state_sharding = false;
  bool profile = false;
  std::string profile_dir;  // Resolved (ResolveOutputPath).
  bool debug = false;
  int64_t train_limit = -1, test_limit = -1;
  int64_t seed = 0;
  feeds::DataLoaderMode loader_mode = feeds::DataLoaderMode::kAsync;
  int loader_workers = 1;
  int intra_op_threads = 0;  // Per IPU, besides its own; 0: automatic.
  bool fp16 = false;
  FloatingPointBehaviourConfig::StochasticRoundingBehaviour esr =
      FloatingPointBehaviourConfig::REPLICA_IDENTICAL_ONLY;
  optimizers::LossScaling loss_scaling;  // Set by the parser.
  // Checkpoints (examples/tutorial_checkpoints.h): the directory (resolved;
  // empty: none), weight updates between saves (a multiple of
  // device_iterations; 0: at the end), how many stay, resume from the
  // newest, and stop after this many weight updates in all (0: never).
  std::string checkpoint_dir;
  int64_t checkpoint_every = 0;
  int keep_checkpoints = 3;
  bool resume = false;
  int64_t stop_after = 0;

  bool pipelined() const { return strategy == "pipelined"; }
};

// Sets the usage message, parses the command line (ParseCommandLine; a
// value Abseil cannot parse exits) and checks every flag for its whole
// range: InvalidArgument naming each flag at fault, its value and the
// limit (--learning-rate nan, --gradient-accumulation -7, --batch-size
// 2^31-1, ...), products of flags over their limits (images per weight
// update and per call), or the replicas, stages and IPUs when the
// replication factor cannot be laid out or filled.
// `processes`: how many processes train together (their replicas share
// the default gradient accumulation's combined batch).
absl::StatusOr<TutorialFlags> ParseTutorialFlags(int argc, char** argv,
                                                 int processes = 1);
// The same for `args` ("--name=value", "--name value", "--bool",
// "--nobool"; dashes or underscores), without exiting: a value that does
// not parse or a flag that is not the example's is InvalidArgument. Flags
// not given have their defaults (Abseil's flags are restored on return).
// For tests and the fuzzer; not thread-safe (the flags are process-wide).
absl::StatusOr<TutorialFlags> ParseTutorialFlagArgs(
    const std::vector<std::string>& args);

// The DataLoader options the flags give (poptorch.DataLoader's): for
// training, the micro-batch, device iterations and accumulation, shuffled
// (seed 42 + --seed); for inference, the test micro-batch and test
// iterations, in order. `process_index` of flags.processes: this
// process's share of the data.
feeds::DataLoaderOptions LoaderOptions(const TutorialFlags& flags,
                                       bool training, int process_index);

}  // namespace ipuflow::examples

#endif  // IPUFLOW_EXAMPLES_TUTORIAL_FLAGS_H_
