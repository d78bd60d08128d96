// TrainingCheckpoint: what a training run is, for a checkpoint, and its save
// and exact restore (in the spirit of TensorFlow's tf.train.Checkpoint: an
// object that knows the run's parts, kept for the run's life). The run
// continues bit for bit after a restore: same weights, same loss curve.
//
//   // The run: a compiled device program (step, loop, pipeline,
//   // replicated), its graph, and its infeeds with the DataLoaders that
//   // feed them.
//   TrainingCheckpoint ckpt(&graph, exe);
//   ckpt.AddInfeed("train", infeed.get(), loader.get());
//   ...exe->Execute(...)...                      // k weight updates
//   ASSIGN_OR_RETURN(std::string path, ckpt.Save("/ckpt", k));
//
//   // Resuming (a new process): the input first, at the saved position,
//   ASSIGN_OR_RETURN(CheckpointContents c, ReadCheckpoint(path));
//   ASSIGN_OR_RETURN(auto loader, ResumeDataLoader(c, "train", samples, o));
//   ... build the graph on loader->ToInfeedDataset(), compile, Initialize,
//   TrainingCheckpoint ckpt(&graph, exe);
//   ckpt.AddInfeed("train", infeed.get(), loader.get());
//   RETURN_IF_ERROR(ckpt.Restore(c));            // all or nothing
//
// What is saved (docs/CHECKPOINTS.md):
//   - every variable on the executable's IPUs, once when every replica holds
//     the same value and per replica otherwise: weights, float32 master
//     weights, optimizer slots and step counters, loss-scaling state,
//     gradient accumulators (zero at a boundary), optimizer state offloaded
//     to remote memory (RemoteState: sharded state gathered whole, sharded
//     again by the next weight update's store);
//   - the random streams: the system's seed (stochastic rounding) and the
//     run counter of every program and sub-program of every replica (loop
//     bodies, a pipeline's stage programs and weight update; dropout,
//     random ops and stochastic rounding draw from seed, program and run;
//     core/program.h);
//   - the input position: per infeed the elements each replica's device
//     consumed (IPUInfeedQueue::ConsumedPerReplica: not what the host read
//     ahead), and per DataLoader the epoch and sample it reached, with what
//     its order depends on (seed, shuffle, drop_last, sizes).
// Refused (FailedPrecondition naming the cause): a checkpoint in the middle
// of a gradient accumulation (a counter of optimizers::
// kAccumulationCounters not at 0), or of a DataLoader step (a pipeline
// stopped part-way through a run).
//
// A run's checkpoints carry its id (Manifest.run_id): random for a new
// TrainingCheckpoint, the checkpoint's after a Restore (the resumed run
// continues it). Save refuses a directory that holds another run's
// checkpoints, or this run's past `weight_updates`
// (checkpoint_directory.h; docs/CHECKPOINTS.md, "One run per directory").
//
// Multi-process runs (the system has a ProcessLink): Capture, Save and
// Restore are collective, every process calls them at the same step.
// Capture returns this process's view: the variables every replica of
// every process holds alike (compared by digest) as replica -1, the others
// per replica (global indices), its replicas' random streams and its
// input positions. Save writes them as process_parts.h's shared file and
// parts; resume from ReadCheckpoint(path, process_index, process_count).
// Restore refuses another process count or replicas per process (no
// re-split across processes), and a refusal on any process is every
// process's.
//
// Restore checks everything first (topology, every variable's presence,
// dtype and shape, the feeds, the random streams' programs), and refuses
// with an error naming the variable and both values; only then does it
// assign. Into a different replica count where the data split allows: every
// variable replica-identical, the infeed position a multiple of the new
// replica count, a DataLoader's sample a whole number of its new steps.
//
// Thread safety: call Save and Restore between Executes of the executable,
// from one thread. The graph, executable, infeeds and loaders must outlive
// this object.
#ifndef IPUFLOW_CORE_CHECKPOINT_TRAINING_STATE_H_
#define IPUFLOW_CORE_CHECKPOINT_TRAINING_STATE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/checkpoint/checkpoint_directory.h"
#include "core/checkpoint/checkpoint_file.h"
#include "core/checkpoint/process_parts.h"
#include "core/checkpoint/resume_input.h"
#include "core/graph.h"
#include "core/ipu/device_program.h"
#include "core/resource.h"
#include "feeds/data_loader.h"
#include "feeds/infeed_queue.h"

namespace ipuflow::checkpoint {

class TrainingCheckpoint {
 public:
  TrainingCheckpoint(const Graph* graph, DeviceProgram* executable);

  // An infeed the executable reads, saved under `name`. `loader` (may be
  // null): the DataLoader whose ToInfeedDataset() the infeed reads, made
  // for it (Create or ResumeDataLoader) and read only by it.
  void AddInfeed(const std::string& name, feeds::IPUInfeedQueue* queue,
                 feeds::DataLoader* loader = nullptr);

  // The run's state now, with `weight_updates` as its step counter.
  absl::StatusOr<CheckpointContents> Capture(int64_t weight_updates) const;
  // Capture, then WriteNumberedCheckpoint(dir, weight_updates, keep_last)
  // (WriteProcessCheckpoint with a ProcessLink). keep_last >= 1.
  absl::StatusOr<std::string> Save(const std::string& dir,
                                   int64_t weight_updates, int keep_last = 3,
                                   const WriteOptions& options = {}) const;
  // Checks `c` against this run, then restores it (file comment); this
  // run then carries `c`'s run id.
  absl::Status Restore(const CheckpointContents& c);

  // This run's id (process 0's in a multi-process run's checkpoints).
  uint64_t run_id() const { return run_id_; }

  // A hash of the variables' names, dtypes and shapes: what "the same
  // model" means for a checkpoint.
  static uint64_t Fingerprint(const std::vector<TensorEntry>& variables);

 private:
  struct Feed {
    std::string name;
    feeds::IPUInfeedQueue* queue;
    feeds::DataLoader* loader;
    // Elements consumed before this queue existed (a restored run's), per
    // replica.
    std::vector<int64_t> base;
  };
  // What Restore assigns, once every check passed.
  struct RestorePlan {
    uint64_t seed = 0;
    uint64_t run_id = 0;
    std::vector<std::vector<std::pair<std::string, uint64_t>>> runs;
    std::vector<std::pair<std::shared_ptr<VariableResource>, const Tensor*>>
        assign;
    std::vector<std::vector<int64_t>> bases;  // [feed][replica]
  };
  absl::Status CheckSupported(const char* what) const;
  // Capture's infeed and DataLoader positions, added to `m`.
  absl::Status AddInputPositions(int replicas, Manifest* m) const;
  // Every check of Restore on this process (training_restore.cc).
  absl::Status Check(const CheckpointContents& c, RestorePlan* plan) const;
  // The infeeds' names, queues, DataLoaders and positions against `m`'s;
  // `bases`: what each feed's replicas had consumed.
  absl::Status CheckFeeds(const Manifest& m, int replicas,
                          std::vector<std::vector<int64_t>>* bases) const;
  absl::Status Apply(const RestorePlan& plan);

  const Graph* graph_;
  DeviceProgram* exe_;
  std::vector<Feed> feeds_;
  uint64_t run_id_;
};

}  // namespace ipuflow::checkpoint

#endif  // IPUFLOW_CORE_CHECKPOINT_TRAINING_STATE_H_
