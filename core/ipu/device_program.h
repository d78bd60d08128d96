// DeviceProgram: a graph compiled for the emulated IPU system, the
// Executable kind of steps, loops and sharded models. A program whose nodes
// are placed on S IPUs (Scope::WithIpu) runs as R replicas
// (ReplicationFactor in executable.h: IPUConfig.replication_factor, or
// K / S on a system of K IPUs); replica r uses IPUs [r*S, r*S + S): it is
// driven from IPU r*S's thread, and each run of consecutive nodes placed on
// shard k executes on IPU r*S+k's thread with that IPU's variables and
// threads (sharded execution: one IPU of a replica is busy at a time).
// A program whose nodes run a device frame (a pipeline, device_frame.h)
// spans the frame's IPUs too: the frame is lowered when the program
// compiles, its kernel runs the frame's per-IPU work lists.
// Compiling checks each IPU of a replica against its memory (the one
// report, IpuMemory: weights, accumulators, optimizer state, constants,
// remote state, arena, loop bodies, stash, FIFOs) and fails with
// ResourceExhausted and that per-category report. Optimizer state that the
// program's gradient-accumulation wrappers and pipelines offload (a RemoteState
// host resource, core/ipu/remote_state.h) counts as remote memory, 1/R per
// replica with replicated optimizer-state sharding.
//
//   ASSIGN_OR_RETURN(auto program,
//                    DeviceProgram::Compile(&system, graph, spec));
//   std::vector<std::vector<Tensor>> results;  // [replica][fetch]
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
#include "core/ipu/device_frame.h"
#include "core/ipu/executable.h"
#include "core/ipu/ipu_system.h"
#include "core/mutex.h"
#include "core/program.h"

namespace ipuflow {
class RemoteState;
}  // namespace ipuflow

namespace ipuflow {

// The one per-IPU memory report: IPU `ipu` (`shard` of its replica), what
// it holds by category against `budget`.
std::string IpuMemoryReport(int ipu, int shard, const IpuMemory& m,
                            int64_t budget);
// Checks replica 0's IPUs (ipus[k] on IPU k) against their budgets; fills
// `report` either way. ResourceExhausted "out of memory: <what> does not
// fit on its IPUs" with the report when one is over.
absl::Status CheckIpuMemory(IPUSystem& system, const std::string& what,
                            const std::vector<IpuMemory>& ipus,
                            std::string* report);

// The run environment of IPU `ipu` for replica `replica` of `replicas` of
// a device program whose collectives are `group`: the IPU's threads,
// variables and budget, the system's floating-point behaviour and
// cancellation (a run sets its own). What every kernel of a device program
// runs with, a pipeline's programs included.
RunEnv IpuRunEnv(IPUSystem& system, int ipu, int replica, int replicas,
                 CollectiveGroup* group);

// Sets env->post_to_shard so that shard k of a program runs on the thread
// of (*shards)[k].device with that env (inline when called there): the
// IPUs of a replica working at once (a pipeline's weight update). The
// thread CPU seconds of work run on another IPU's thread are added to
// (*cpu)[k], which only that thread writes. `shards` and `cpu` must
// outlive the env's runs.
void PostToShards(std::vector<RunEnv>* shards, std::vector<double>* cpu,
                  RunEnv* env);

class DeviceProgram : public Executable {
 public:
  static absl::StatusOr<std::unique_ptr<DeviceProgram>> Compile(
      IPUSystem* system, const Graph& graph, const ProgramSpec& spec);
  ~DeviceProgram();

  IPUSystem* system() const override { return system_; }
  int num_replicas() const override {
    return static_cast<int>(replicas_.size());
  }
  int ipus_per_replica() const override { return ipus_per_replica_; }
  int num_shards() const { return num_shards_; }
  const Program& program(int replica) const { return *replicas_[replica]; }
  // For restoring its run counters between Executes (checkpoints).
  Program& mutable_program(int replica) { return *replicas_[replica]; }
  // The replicas' collectives (also what identifies this program to the
  // device frames it lowered).
  CollectiveGroup* collectives() const { return group_.get(); }
  // The IPU that runs replica r (its first shard).
  int ipu_of_replica(int r) const { return r * ipus_per_replica_; }
  // The host resources (feed queues) its nodes use, found through its graph
  // when it was compiled; the owners decide their lifetime.
  const std::vector<std::weak_ptr<HostResource>>& host_resources() const {
    return host_resources_;
  }

  // Runs every replica, each on its IPU's thread, with its feeds (args[r],
  // or args[0] for all). (*fetches)[r] holds replica r's results. An error
  // in one replica cancels the others' collectives; the root cause is
  // returned.
  absl::Status Execute(const std::vector<std::vector<Tensor>>& args,
                       std::vector<std::vector<Tensor>>* fetches) override;

  // Per IPU of a replica, by category, against the budget.
  std::string MemoryReport() const override;
  // The same, as numbers: what IPU k of replica 0 holds.
  const std::vector<IpuMemory>& ipu_memory() const { return ipu_memory_; }

 protected:
  std::optional<Tensor> OffloadedValue(int replica,
                                       const std::string& name) const override;

 private:
  DeviceProgram() = default;
  // Execute's work, with this run's cancellation.
  absl::Status ExecuteReplicas(
      const std::vector<std::vector<Tensor>>& args,
      std::vector<std::vector<Tensor>>* fetches,
      const std::shared_ptr<CancellationManager>& cancel);
  // Runs `work` on the thread of replica `replica`'s IPU for `shard`.
  void RunOnShard(int replica, int shard,
                  const std::function<void(RunEnv&)>& work);

  IPUSystem* system_ = nullptr;
  uint64_t generation_ = 0;  // The system's, when compiled.
  int num_shards_ = 1;
  int ipus_per_replica_ = 1;  // num_shards_, or a frame's IPUs if more.
  std::vector<std::unique_ptr<Program>> replicas_;
  std::vector<std::vector<RunEnv>> envs_;  // [replica][shard]
  std::unique_ptr<CollectiveGroup> group_;
  std::string memory_report_;
  std::vector<IpuMemory> ipu_memory_;
  // The feed queues the program uses: told when a run fails (RunStopped).
  std::vector<std::weak_ptr<HostResource>> host_resources_;
  // Ends this program's part in feeding its host resources, once: on its
  // destruction, or when its system is destroyed, reconfigured or
  // cancelled (a callback on the system's cancellation, held for the
  // program's life), whichever comes first (HostResource::RemoveProducer).
  struct ProducerLink;
  std::shared_ptr<ProducerLink> producer_link_;
  std::shared_ptr<CancellationManager> system_cancel_;
  int system_cancel_token_ = -1;
  // The device frames lowered for this program (released on destruction).
  std::vector<std::weak_ptr<DeviceFrame>> frames_;
  // The offloaded optimizer state planned for it (core/ipu/remote_state.h).
  // Held: a plan keeps the remote buffers while the program lives.
  std::vector<std::shared_ptr<RemoteState>> remote_states_;
};

}  // namespace ipuflow

#endif  // IPUFLOW_CORE_IPU_DEVICE_PROGRAM_H_
