// The main example's checkpoints (examples/train_fashion_mnist.cc;
// --checkpoint-dir, --checkpoint-every, --keep-checkpoints, --resume,
// --stop-after; docs/CHECKPOINTS.md): where a training run starts (the
// newest checkpoint of the directory with --resume, else the beginning)
// and stops, its training DataLoader standing there, the restore once the
// training program is compiled and initialised, and the saves between
// training calls (checkpoints are taken at weight-update boundaries: a
// call's end).
//
//   ASSIGN_OR_RETURN(TutorialCheckpoints ckpt, TutorialCheckpoints::Open(o));
//   // (or Open(flags, process_index))
//   ASSIGN_OR_RETURN(auto loader, ckpt.TrainLoader(samples, loader_options));
//   ASSIGN_OR_RETURN(auto calls, ckpt.Calls(epochs * loader->len()));
//   ... an infeed named kInfeedName on the loader, the pipelines, compile,
//   ... Initialize ...
//   RETURN_IF_ERROR(ckpt.Attach(graph, trained));
//   for (int64_t c = calls.first; c < calls.last; ++c) {
//     ... one training call ...
//     RETURN_IF_ERROR(ckpt.AfterCall(c + 1, c + 1 == calls.last));
//   }
//
// Under mpirun every process makes one with its process index: each reads
// the shared file and its own part, and every save and restore is
// collective (every process saves at the same call).
//
// Owns what it reads (the checkpoint, until Attach restored it) and the
// TrainingCheckpoint; the graph and program it is attached to must outlive
// it. Used from the thread that runs the training calls.
#ifndef IPUFLOW_EXAMPLES_TUTORIAL_CHECKPOINTS_H_
#define IPUFLOW_EXAMPLES_TUTORIAL_CHECKPOINTS_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "core/checkpoint/checkpoint_directory.h"
#include "core/checkpoint/training_state.h"
#include "examples/tutorial_flags.h"
#include "feeds/data_loader.h"

namespace ipuflow::examples {

struct TutorialCheckpointOptions {
  std::string dir;         // Empty: no checkpoints.
  int64_t every = 0;       // Weight updates between saves; 0: at the end.
  int keep = 3;            // The newest K stay in `dir`.
  bool resume = false;     // From the newest checkpoint of `dir`, if any.
  int64_t per_call = 1;    // Weight updates of one training call.
  int64_t stop_after = 0;  // Weight updates in all; 0: train to the end.
  // Under mpirun: this process of the run's (its part of a checkpoint;
  // core/checkpoint/process_parts.h).
  int process_index = 0;
  int process_count = 1;
};

// The training calls of a run: [first, last) of [0, total).
struct TrainingCalls {
  int64_t first = 0, last = 0, total = 0;
  int64_t done() const { return last - first; }
};

class TutorialCheckpoints {
 public:
  // With resume, reads the newest checkpoint of `o.dir` and prints
  // "Resuming from <file> (weight update N)" (none: the run starts at the
  // beginning). InvalidArgument when it does not stand at
  // a whole number of training calls (another --device-iterations);
  // a damaged file's error (core/checkpoint/checkpoint_file.h). Without
  // resume, FailedPrecondition when `o.dir` holds checkpoints (an earlier
  // run's: a directory holds one run's, core/checkpoint/
  // checkpoint_directory.h), and the directory's own errors.
  static absl::StatusOr<TutorialCheckpoints> Open(
      const TutorialCheckpointOptions& o);
  // The same with the flags' options (--checkpoint-dir, --checkpoint-every,
  // --keep-checkpoints, --resume, --device-iterations, --stop-after), for
  // process `process_index` of flags.processes.
  static absl::StatusOr<TutorialCheckpoints> Open(const TutorialFlags& flags,
                                                  int process_index);

  // The weight updates done before this run (the checkpoint's), and its
  // file ("" when starting at the beginning).
  int64_t first_update() const { return first_update_; }
  const std::string& resumed_from() const { return resumed_from_; }

  // The training DataLoader: at the checkpoint's position
  // (ResumeDataLoader: its order checked against `options`) or new.
  absl::StatusOr<std::unique_ptr<feeds::DataLoader>> TrainLoader(
      feeds::DatasetPtr samples, const feeds::DataLoaderOptions& options);

  // The calls this run makes of a training of `total` calls: from the
  // checkpoint's (0 without one) to --stop-after's or the end.
  // InvalidArgument when the checkpoint is past `total` (fewer --epochs)
  // or --stop-after is not after the checkpoint.
  absl::StatusOr<TrainingCalls> Calls(int64_t total) const;

  // The name of the training infeed (feeds::InfeedOptions::name): its
  // checkpoints' name for it.
  static constexpr char kInfeedName[] = "train";

  // The run to save and, when resuming, restores the checkpoint into it
  // (after Initialize, before the first training call). Its infeed, named
  // kInfeedName, reads TrainLoader's loader (TrainingCheckpoint finds both).
  absl::Status Attach(const Graph* graph, DeviceProgram* trained);

  // After training call `calls` (counted from the run's very start):
  // saves when its weight updates are a multiple of `every`, or at the
  // `last` call, then prints "Checkpoints: 3 saved in <dir> (the newest 3
  // kept), 0.41 s".
  absl::Status AfterCall(int64_t calls, bool last);

  // --stop-after reached: prints "Stopped after N weight updates
  // (--stop-after); continue with --resume". OK.
  absl::Status Stopped() const;

 private:
  TutorialCheckpoints() = default;
  absl::Status Summary() const;

  TutorialCheckpointOptions o_;
  int64_t first_update_ = 0;
  std::string resumed_from_;
  // Read by Open, restored and dropped by Attach.
  std::optional<checkpoint::CheckpointContents> resume_;
  std::unique_ptr<checkpoint::TrainingCheckpoint> run_;
  int64_t last_saved_ = -1;
  int saves_ = 0;
  double save_seconds_ = 0;
};

}  // namespace ipuflow::examples

#endif  // IPUFLOW_EXAMPLES_TUTORIAL_CHECKPOINTS_H_
