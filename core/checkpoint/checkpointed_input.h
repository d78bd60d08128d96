// CheckpointedInput: a host resource whose position in its data a training
// checkpoint saves and restores (TrainingCheckpoint, training_state.h). An
// infeed queue implements it in feeds/, with the DataLoader behind it when
// there is one; core/checkpoint sees only this interface, so it depends on
// nothing above core/.
//
// Nothing is registered by hand: TrainingCheckpoint finds the inputs among
// the host resources its device program uses (DeviceProgram::
// host_resources, which the program found through its graph when it was
// compiled), by dynamic_cast, as executables find a FedResource.
//
// Thread safety: called by TrainingCheckpoint between runs of the program,
// from one thread.
#ifndef IPUFLOW_CORE_CHECKPOINT_CHECKPOINTED_INPUT_H_
#define IPUFLOW_CORE_CHECKPOINT_CHECKPOINTED_INPUT_H_

#include <string>

#include "absl/status/status.h"
#include "core/checkpoint/checkpoint.pb.h"

namespace ipuflow::checkpoint {

class CheckpointedInput {
 public:
  virtual ~CheckpointedInput() = default;

  // The name the input is saved under; unique among a program's inputs.
  virtual const std::string& checkpoint_name() const = 0;
  // Adds the input's position for this process's `replicas` replicas to
  // `m` (Manifest.infeeds, and Manifest.loaders when a DataLoader feeds
  // it). FailedPrecondition naming the input when it cannot be saved now
  // (part-way through a DataLoader step).
  virtual absl::Status SavePosition(int replicas, Manifest* m) const = 0;
  // Checks `m`'s position of this input against it, for `replicas`
  // replicas; the error names the input and both values. Changes nothing.
  virtual absl::Status CheckPosition(const Manifest& m, int replicas) const = 0;
  // Takes `m`'s position as where the input's replicas stand. REQUIRES:
  // CheckPosition(m, replicas) passed.
  virtual void RestorePosition(const Manifest& m, int replicas) = 0;
};

}  // namespace ipuflow::checkpoint

#endif  // IPUFLOW_CORE_CHECKPOINT_CHECKPOINTED_INPUT_H_
