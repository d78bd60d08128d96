// BroadcastVariables: every replica of every process takes global replica
// 0's variables, as Horovod's broadcast_global_variables(0) after the
// initialisers ("Horovod with TensorFlow", reference wave2_reference.md
// section 4). Processes already agree on the seed (IPUSystem::
// SetProcessLink), so seeded initialisers give the same values anyway; the
// broadcast also covers values the seed does not decide: weights a user
// loaded from a file on one process only, or host-side randomness.
//
// IPU k of local replica r is IPU r x ipus_per_replica + k; its variables
// take those of IPU k of process 0 (its local replica 0). Every process
// must hold the same variables there (name, dtype, shape, initialised or
// not): otherwise FailedPrecondition on every process, naming the first
// process and variable that differ.
#ifndef IPUFLOW_CORE_IPU_BROADCAST_VARIABLES_H_
#define IPUFLOW_CORE_IPU_BROADCAST_VARIABLES_H_

#include "absl/status/status.h"
#include "core/ipu/ipu_system.h"

namespace ipuflow {

// A collective over `system`'s process link (OK at once without one):
// every process calls it with the same `tag` (IPUStrategy::Initialize
// takes IPUSystem::NextProgramTag()) after the same programs.
absl::Status BroadcastVariables(IPUSystem& system, int replicas,
                                int ipus_per_replica, uint64_t tag);

}  // namespace ipuflow

#endif  // IPUFLOW_CORE_IPU_BROADCAST_VARIABLES_H_
