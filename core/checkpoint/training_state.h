// TrainingCheckpoint: what a training run is, for a checkpoint, and its save
// and exact restore (in the spirit of TensorFlow's tf.train.Checkpoint: an
// object that knows the run's parts, kept for the run's life). The run
// continues bit for bit after a restore: same weights, same loss curve.
//
//   // The run: a compiled device program (step, loop, pipeline,
//   // replicated) and its graph. Its inputs are found, not added: the
//   // infeeds its nodes read (checkpointed_input.h), each saved under its
//   // name with the DataLoader behind it (feeds/infeed_queue.h).
//   TrainingCheckpoint ckpt(&graph, exe);
//   ...exe->Execute(...)...                      // k weight updates
//   ASSIGN_OR_RETURN(std::string path, ckpt.Save("/ckpt", k));
//
//   // Resuming (a new process): the input first, at the saved position
//   // (feeds/resume_input.h),
//   ASSIGN_OR_RETURN(CheckpointContents c, ReadCheckpoint(path));
//   ASSIGN_OR_RETURN(auto loader,
//                    feeds::ResumeDataLoader(c, "train", samples, o));
//   ... an infeed named "train" on loader->ToInfeedDataset(), the graph,
//   ... compile, Initialize,
//   TrainingCheckpoint ckpt(&graph, exe);
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
// of a gradient accumulation (a counter of the graph collection
// kAccumulationCountersCollection, core/graph_collections.h, not at 0), or
// of a DataLoader step (a pipeline stopped part-way through a run), or of a
// program whose inputs share a name.
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
// from one thread. The graph and executable must outlive this object; an
// input destroyed before a Save or Restore fails it (FailedPrecondition).
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
#include "core/checkpoint/checkpointed_input.h"
#include "core/checkpoint/process_parts.h"
#include "core/graph.h"
#include "core/ipu/device_program.h"
#include "core/resource.h"

namespace ipuflow::checkpoint {

class TrainingCheckpoint {
 public:
  TrainingCheckpoint(const Graph* graph, DeviceProgram* executable);

  // The names of the inputs found in the executable, in its order.
  std::vector<std::string> input_names() const;

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
  // An input of the executable (checkpointed_input.h), while it lives.
  struct Input {
    std::string name;
    std::weak_ptr<HostResource> resource;
    CheckpointedInput* input;  // resource's, valid while it lives.
  };
  // What Restore assigns, once every check passed.
  struct RestorePlan {
    uint64_t seed = 0;
    uint64_t run_id = 0;
    std::vector<std::vector<std::pair<std::string, uint64_t>>> runs;
    std::vector<std::pair<std::shared_ptr<VariableResource>, const Tensor*>>
        assign;
    // The inputs, kept alive from the checks to their restore, and what
    // they restore: `manifest`'s positions for `replicas` replicas.
    std::vector<std::shared_ptr<HostResource>> inputs;
    const Manifest* manifest = nullptr;
    int replicas = 0;
  };
  absl::Status CheckSupported(const char* what) const;
  // The inputs alive, in order; FailedPrecondition naming one that was
  // destroyed, or two that share a name. `what`: "checkpoint", "restore".
  absl::StatusOr<std::vector<std::shared_ptr<HostResource>>> LiveInputs(
      const char* what) const;
  // Capture's input positions, added to `m`.
  absl::Status AddInputPositions(int replicas, Manifest* m) const;
  // Every check of Restore on this process (training_restore.cc).
  absl::Status Check(const CheckpointContents& c, RestorePlan* plan) const;
  // The inputs' names and positions against `m`'s; `inputs`: the inputs.
  absl::Status CheckInputs(
      const Manifest& m, int replicas,
      std::vector<std::shared_ptr<HostResource>>* inputs) const;
  absl::Status Apply(const RestorePlan& plan);

  const Graph* graph_;
  DeviceProgram* exe_;
  std::vector<Input> inputs_;
  uint64_t run_id_;
};

}  // namespace ipuflow::checkpoint

#endif  // IPUFLOW_CORE_CHECKPOINT_TRAINING_STATE_H_
