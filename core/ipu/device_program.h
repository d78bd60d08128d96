// DeviceProgram: a graph compiled for the emulated IPU system, the
// Executable kind of steps, loops and sharded models. A program whose nodes
// are placed on S IPUs (Scope::WithIpu) runs as R replicas
// (ReplicationFactor in executable.h: IPUConfig.replication_factor, or
// K / S on a system of K IPUs); replica r uses IPUs [r*S, r*S + S): it is
// driven from IPU r*S's thread, and each run of consecutive nodes placed on
// shard k executes on IPU r*S+k's thread with that IPU's variables and
// threads (sharded execution: one IPU of a replica is busy at a time).
// Compiling checks each
// shard against its IPU's memory (always-live + peak not-always-live) and
// fails with ResourceExhausted and a per-category report.
//
//   ASSIGN_OR_RETURN(auto program, DeviceProgram::Compile(&system, graph, spec));
//   std::vector<std::vector<Tensor>> results;   // [replica][fetch]
//   RETURN_IF_ERROR(program->Execute({feeds}, &results));
//
// Errors: a replica's error is returned as "replica r (IPU k): <node>:
// <message>"; it cancels the run, so the other replicas' collectives and
// feed waits return Cancelled ("replica r failed: ..."), and the root cause
// is what Execute returns. The next Execute starts afresh.
//
// Thread safety: a second Execute while one runs returns FailedPrecondition
// (it does not wait). Destroying the program while another thread runs it
// cancels that run ("executable destroyed") and waits for it to return.
// The system must outlive the program; after IPUSystem::Configure it
// refuses to run (FailedPrecondition: compile it again).
#ifndef IPUFLOW_CORE_IPU_DEVICE_PROGRAM_H_
#define IPUFLOW_CORE_IPU_DEVICE_PROGRAM_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/ipu/collective_group.h"
#include "core/ipu/executable.h"
#include "core/ipu/ipu_system.h"
#include "core/mutex.h"
#include "core/program.h"

namespace ipuflow {

class DeviceProgram : public Executable {
 public:
  static absl::StatusOr<std::unique_ptr<DeviceProgram>> Compile(
      IPUSystem* system, const Graph& graph, const ProgramSpec& spec);
  ~DeviceProgram();

  IPUSystem* system() const override { return system_; }
  int num_replicas() const override {
    return static_cast<int>(replicas_.size());
  }
  int ipus_per_replica() const override { return num_shards_; }
  int num_shards() const { return num_shards_; }
  const Program& program(int replica) const { return *replicas_[replica]; }
  // The IPU that runs replica r (its first shard).
  int ipu_of_replica(int r) const { return r * num_shards_; }

  // Runs every replica, each on its IPU's thread, with its feeds (args[r],
  // or args[0] for all). (*fetches)[r] holds replica r's results. An error
  // in one replica cancels the others' collectives; the root cause is
  // returned.
  absl::Status Execute(const std::vector<std::vector<Tensor>>& args,
                       std::vector<std::vector<Tensor>>* fetches) override;

  // Per shard: always-live and not-always-live bytes against the budget.
  std::string MemoryReport() const override;

 private:
  DeviceProgram() = default;
  // Execute's work, with this run's cancellation.
  absl::Status ExecuteReplicas(const std::vector<std::vector<Tensor>>& args,
                               std::vector<std::vector<Tensor>>* fetches,
                               const std::shared_ptr<CancellationManager>& cancel);
  // Runs `work` on the thread of replica `replica`'s IPU for `shard`.
  void RunOnShard(int replica, int shard,
                  const std::function<void(RunEnv&)>& work);

  IPUSystem* system_ = nullptr;
  uint64_t generation_ = 0;  // The system's, when compiled.
  int num_shards_ = 1;
  std::vector<std::unique_ptr<Program>> replicas_;
  std::vector<std::vector<RunEnv>> envs_;  // [replica][shard]
  std::unique_ptr<CollectiveGroup> group_;
  std::string memory_report_;
  // The feed queues the program uses: told when a run fails (RunStopped).
  std::vector<std::weak_ptr<HostResource>> host_resources_;
};

}  // namespace ipuflow

#endif  // IPUFLOW_CORE_IPU_DEVICE_PROGRAM_H_
