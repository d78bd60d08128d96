// RemoteState: optimizer state that a device program keeps in the IPUs'
// remote (host-attached) memory between weight updates, streamed onto the
// IPU for each update and back after it (TensorFlow IPU guide 6.9,
// "Variable offloading" and "Replicated tensor sharding"; the original's
// offload_weight_update_variables and replicated_optimizer_state_sharding
// arguments of GradientAccumulationOptimizerV2 and
// CrossReplicaGradientAccumulationOptimizerV2).
//
// Who builds what:
//   - a gradient-accumulation wrapper (optimizers/gradient_accumulation.h)
//     or a pipeline (pipelining/pipeline_backward.cc) owns one RemoteState,
//     registers it with the graph as a host resource (as an infeed queue
//     is), lists the variables only its weight update uses (AddVariable:
//     the inner optimizer's slots), and brackets each (conditional) update
//     with a load and a store node (optimizers/offloaded_state.h) whose
//     kernels call Load / Store;
//   - DeviceProgram::Compile finds it among the graph's host resources (by
//     kind, as device frames) and calls Plan: which variables go to remote
//     memory (PlaceOptimizerState, core/memory_plan.h), what each IPU holds
//     (IpuMemory's remote category), errors;
//   - at run time Store moves a variable's value off the IPU into this
//     replica's remote buffer (with sharding: a reduce-scatter with the
//     LOCAL op keeps 1/R of it), Load brings it back (an all-gather of the
//     R shards); each counts the bytes it moves in the IPU's
//     TransferCounters::remote_memory.
//
// A plan belongs to one device program, keyed by its CollectiveGroup (as a
// device frame's lowering); Release drops it. The remote buffers are the
// IPUs': programs of one graph on one system share them. Outside a device
// program (no plan for env.collectives) Load and Store do nothing: the state
// stays on the IPU.
//
// Thread safety: Plan and Release on host threads; Load / Store from the
// replicas' IPU threads concurrently (each replica its own buffers).
#ifndef IPUFLOW_CORE_IPU_REMOTE_STATE_H_
#define IPUFLOW_CORE_IPU_REMOTE_STATE_H_

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/graph.h"
#include "core/ipu/collective_group.h"
#include "core/ipu/ipu_system.h"
#include "core/kernel.h"
#include "core/memory_plan.h"
#include "core/mutex.h"

namespace ipuflow {

// The original's three-state offload_weight_update_variables: unset is
// automatic.
struct RemoteStateOptions {
  // nullopt: automatic: offload when replicated_optimizer_state_sharding
  // is on, or when an IPU would not hold the state beside everything else
  // (its budget); true: always; false: never.
  std::optional<bool> offload_weight_update_variables;
  bool replicated_optimizer_state_sharding = false;
  // Whether every replica holds the same optimizer state (a cross-replica
  // wrapper); sharding over R > 1 replicas needs it, and the error without
  // it ends with `replica_identical_fix` (what the owner's user should do).
  bool replica_identical = false;
  std::string replica_identical_fix =
      "use optimizers::CrossReplicaGradientAccumulationOptimizerV2";
};

// The store and load of replicated tensor sharding, as the original: pad to a
// multiple of R, reduce-scatter with the LOCAL op (each replica keeps its own
// chunk; nothing is exchanged) / all-gather the chunks, drop the padding,
// restore `shape`.
absl::StatusOr<Tensor> ShardToRemote(CollectiveGroup* group, int replica,
                                     int replicas, const std::string& key,
                                     const Tensor& full);
absl::StatusOr<Tensor> GatherFromRemote(CollectiveGroup* group, int replica,
                                        int replicas, const std::string& key,
                                        const Tensor& shard,
                                        const TensorShape& shape);

// The load of a sharded update (ZeRO-1, ops/state/update_shard.h): the
// whole-shaped value holding `replica`'s stored chunk in place and zeros
// elsewhere (the update reads and writes only its chunk, so nothing is
// all-gathered). Used by RemoteState::Load.
Tensor ChunkInPlace(const Tensor& chunk, int replica, const TensorShape& shape);

class RemoteState : public HostResource {
 public:
  // `name` names the owner in errors ("GradientAccumulation optimizer").
  RemoteState(std::string name, RemoteStateOptions options)
      : name_(std::move(name)), options_(options) {}

  const RemoteStateOptions& options() const { return options_; }

  // Graph-building time: `variable` (a Variable node, resource `var_name`)
  // is used only by the weight update `update` (an index the load and
  // store nodes of that update carry). Listing one twice keeps the first.
  void AddVariable(int update, const Node* variable,
                   const std::string& var_name);
  // Graph-building time: `update` (of a weight of `elements` elements) may
  // run sharded: its ops take the shard UpdateShardOf gives.
  void ShardUpdate(int update, int64_t elements);

  // Compile time, by the device program whose collectives are `group`:
  // decides which listed variables the program uses go to remote memory and
  // moves their bytes in `ipus` (replica 0's IPUs, filled from the plan)
  // from the optimizer state to the remote category (with sharding, 1/R
  // per replica). InvalidArgument when sharding over R > 1 replicas without
  // replica-identical state.
  absl::Status Plan(IPUSystem* system, int replicas, CollectiveGroup* group,
                    std::vector<IpuMemory>* ipus);
  void Release(CollectiveGroup* group);

  // Run time, on the IPU thread of `env`: bring the state of `update` onto
  // the IPU (nothing before its first store) / move it off.
  absl::Status Load(const RunEnv& env, int update);
  absl::Status Store(const RunEnv& env, int update);
  // The shard {index, count} of `update` in the run `env` belongs to:
  // {replica, replicas} when the plan shards it, else {0, 1} (the whole
  // variable; also outside a device program).
  std::pair<int, int> UpdateShardOf(const RunEnv& env, int update) const;

  // Variable `name` of `replica` while it is in remote memory (whole, the
  // replicas' shards joined), or nullopt.
  std::optional<Tensor> OffloadedValue(CollectiveGroup* group, int replica,
                                       const std::string& name) const;

  absl::Status Prepare(int, bool) override { return absl::OkStatus(); }
  std::string DebugString() const override { return name_; }

 private:
  struct Candidate {
    int update;
    const Node* node;
    std::string name;
    TensorShape shape;
    DType dtype;
  };
  struct Placed {
    std::string name;
    TensorShape shape;
    bool sharded;
    int shard;  // The IPU of the replica that holds it.
  };
  struct Lowering {
    int replicas = 1;  // This process's.
    int shards = 1;    // Sharded state's: the global replicas.
    int ipus_per_replica = 1;
    std::map<int, std::vector<Placed>> by_update;
    // The sharded updates: update -> the weight's element count.
    std::map<int, int64_t> sharded_updates;
  };
  std::shared_ptr<Lowering> Find(CollectiveGroup* group) const;
  // The state `update` streams in the run `env` belongs to (null: none), and
  // its lowering (kept alive by `*lowering` while the caller uses it).
  const std::vector<Placed>* PlacedFor(
      const RunEnv& env, int update, std::shared_ptr<Lowering>* lowering) const;
  // Whether `p` of `update` is loaded as this replica's chunk only (the
  // update runs sharded).
  static bool Chunked(const Lowering& lw, int update, const Placed& p);
  // Counts `bytes` moved between `env`'s IPU and remote memory.
  static void CountRemote(const RunEnv& env, int64_t bytes);

  const std::string name_;
  const RemoteStateOptions options_;
  std::vector<Candidate> candidates_;  // Built before any compile.
  std::map<int, int64_t> shardable_;   // ShardUpdate, before any compile.
  mutable Mutex mu_;
  std::map<CollectiveGroup*, std::shared_ptr<Lowering>> lowerings_
      ABSL_GUARDED_BY(mu_);
  // The remote buffers, by (IPU, variable): remote memory is the IPU's, so
  // every program of the graph on the system sees them. A variable has one
  // home at a time: Store releases it from the IPU; Load brings it back
  // only when the IPU's copy is still released (a variable assigned since,
  // e.g. initialised again, is newer and the remote copy is dropped).
  mutable Mutex remote_mu_;
  std::map<std::pair<int, std::string>, Tensor> remote_
      ABSL_GUARDED_BY(remote_mu_);
};

}  // namespace ipuflow

#endif  // IPUFLOW_CORE_IPU_REMOTE_STATE_H_
