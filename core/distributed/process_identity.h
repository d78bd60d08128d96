// ProcessIdentity: which process of a multi-process run this is, and how
// many replicas each process owns (docs/DISTRIBUTED.md draws process,
// replica and IPU).
//
// Set explicitly, as PopTorch's `configureProcessId(process_id,
// num_processes)` (PopTorch User Guide 10.1), or read from the launcher:
// Open MPI's `OMPI_COMM_WORLD_RANK` / `OMPI_COMM_WORLD_SIZE`, or PopRun's
// `POPDIST_*` variables (PopRun User Guide, "Configuration"), so a PopRun
// launch and a plain `mpirun` give the same replica indices. As in PopDist,
// the replication factor a process sets is its local count: global replica
// g = process_index x local_replicas + local index.
#ifndef IPUFLOW_CORE_DISTRIBUTED_PROCESS_IDENTITY_H_
#define IPUFLOW_CORE_DISTRIBUTED_PROCESS_IDENTITY_H_

#include <functional>
#include <string>

#include "absl/status/statusor.h"

namespace ipuflow::distributed {

struct ProcessIdentity {
  int process_index = 0;
  int process_count = 1;
  // What the launcher said about replicas (PopRun), 0 when it said nothing:
  // then any local count is accepted and the global count follows from it.
  int total_replicas = 0;
  int local_replicas = 0;
  int replica_index_offset = 0;
  std::string source = "single process";  // "explicit", "Open MPI", "PopRun".

  bool multi_process() const { return process_count > 1; }
  // The global index of local replica `local` when each process owns
  // `local_replicas`.
  int GlobalReplica(int local, int local_replicas) const {
    return process_index * local_replicas + local;
  }
  std::string DebugString() const;
};

// InvalidArgument naming both values unless 0 <= index < count and
// 1 <= count <= kMaxProcesses.
absl::StatusOr<ProcessIdentity> ConfigureProcessId(int process_index,
                                                   int process_count);

// The launcher's identity: PopRun's POPDIST_* when
// POPDIST_NUM_TOTAL_REPLICAS is set, else Open MPI's OMPI_COMM_WORLD_*,
// else a single process. Malformed or inconsistent variables are an error
// naming every variable read. `getenv` is for tests.
using EnvReader = std::function<const char*(const char*)>;
absl::StatusOr<ProcessIdentity> ProcessIdentityFromEnvironment(
    const EnvReader& getenv);
absl::StatusOr<ProcessIdentity> ProcessIdentityFromEnvironment();

// Checks `local_replicas` (the replication factor this process asked for)
// against the identity: at least 1, equal to what PopRun said when it said
// something, and a global count that fits an int. The error names every
// value.
absl::Status CheckLocalReplicas(const ProcessIdentity& id, int local_replicas);

inline constexpr int kMaxProcesses = 1 << 16;

}  // namespace ipuflow::distributed

#endif  // IPUFLOW_CORE_DISTRIBUTED_PROCESS_IDENTITY_H_
