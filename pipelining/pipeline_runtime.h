// PipelineRuntime: a built pipeline (pipeline_internal.h) lowered to the
// device layer's work lists (core/ipu/work_lists.h) for one replica on an
// IPU system. Replica r of a pipeline whose stages use S IPUs runs on IPUs
// [r*S, r*S + S), reads its own infeed elements (element i goes to replica
// i % R) and pushes to its outfeed ring; its weight update meets the other
// replicas' in the collectives of a CrossReplicaOptimizer.
//
// Lowering (pipeline_compile.cc): one Program per stage part and pass
// (forward; backward in training) plus the weight update, each for the
// part's IPU; one work-list item per part of each schedule-table item, on
// its IPU's list, with the channels it pops and pushes (activations to the
// next stage, the stash to its own backward, gradients to the previous
// stage), which the work lists size by replaying the table; the per-IPU
// memory check (always-live variables, the largest program arena, stash
// and channel contents at capacity) against the IPU's budget.
//
// Run, per pipeline run (repeat_count of them):
//  - the work lists run (WorkLists::Run: every IPU's list on its thread):
//    the device layer pops an item's channels (resolved once, when sized),
//    this file's item function lays the popped values out as its
//    program's feeds, runs it and returns what to push, and the device
//    layer pushes it. The queues are reached by kernels, as
//    in a device loop: stage 0's first program holds the InfeedDequeue
//    node (it hands the element to the stage's other parts) and the last
//    stage's last program the OutfeedEnqueue node (fed the other last-stage
//    parts' outputs);
//  - after the last backward, the weight update runs (from IPU 0's thread;
//    each IPU updates its own variables on its own thread, at the same time
//    as the others where the update's edges allow), with offloaded optimizer
//    state streamed in before and out after (with replicated optimizer-state
//    sharding, a sharded weight's state as this replica's chunk: its update
//    is fed the shard {r, R}, pipeline_internal.h's weight_shards).
// The first error cancels every channel and queue wait of the run; Run
// returns it (a root cause in preference to the cancellations it caused).
// The stream goes on where the stopped run's results end: each micro-batch
// is an iteration of core/taken_elements.h (one mechanism with device
// loops): the infeed gets back the elements its InfeedDequeue node took
// whose values did not reach the outfeed, except the one whose kernel
// failed (docs/RELIABILITY.md, "Feeds").
//
// Thread safety: Run must not be called concurrently with itself. It may
// be called from the replica's first IPU thread (the pipeline frame's
// kernel): that IPU's list then runs on the calling thread.
#ifndef IPUFLOW_PIPELINING_PIPELINE_RUNTIME_H_
#define IPUFLOW_PIPELINING_PIPELINE_RUNTIME_H_

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/ipu/collective_group.h"
#include "core/ipu/ipu_system.h"
#include "core/ipu/work_lists.h"
#include "core/memory_plan.h"
#include "core/program.h"
#include "core/taken_elements.h"
#include "pipelining/pipeline_internal.h"
#include "pipelining/pipeline_report.h"

namespace ipuflow::pipelining {

namespace internal {
// Bytes of one value of `o`'s (static) shape.
int64_t Bytes(const Output& o);
// The name of a FIFO: "act/<stage>/<from part>/<to part>", "stash/s/p/0"...
std::string Key(const char* kind, int a, int b, int c = 0);
}  // namespace internal

class PipelineRuntime {
 public:
  // Which replica a runtime runs, and the replicas' collectives.
  struct Replica {
    int index = 0;  // Local (this process's), as `count`.
    int count = 1;
    // Not owned; null for one replica. Spans the processes of a
    // multi-process run (core/ipu/process_link.h).
    CollectiveGroup* group = nullptr;
    // Over every process: what sharded state is split by.
    int global_index() const {
      return group != nullptr ? group->global_replica(index) : index;
    }
    int global_count() const {
      return group != nullptr ? group->num_replicas() : count;
    }
  };
  // `built`, `system` and the group are not owned and must outlive the
  // runtime.
  static absl::StatusOr<std::unique_ptr<PipelineRuntime>> Create(
      const BuiltPipeline* built, IPUSystem* system, Replica replica);
  ~PipelineRuntime();

  // repeat_count pipeline runs. `inputs`: the values of options.inputs
  // (the frame node's inputs). `cancel` (shared by the replicas of one
  // Execute; null: a new one) stops the run. `taken`: the enclosing device
  // loop iteration's record (RunEnv::taken), which gets the infeed
  // elements of the micro-batches that completed; null outside a loop.
  absl::StatusOr<PipelineReport> Run(
      const std::vector<Tensor>& inputs,
      std::shared_ptr<CancellationManager> cancel = nullptr,
      TakenElements* taken = nullptr);

  IPUSystem* system() const { return system_; }
  // Offloaded optimizer state `name` as held in this replica's remote
  // memory (its shard, when sharded; `full_shape` then set), between runs.
  std::optional<Tensor> RemoteValue(
      const std::string& name, std::optional<TensorShape>* full_shape) const;
  // The IPUs one replica uses (max device index + 1).
  int num_ipus() const { return num_ipus_; }
  uint64_t generation() const { return generation_; }
  // What each IPU of the replica holds, by category (unchecked: the device
  // program that lowers the frame checks and reports it).
  const std::vector<IpuMemory>& memory() const { return memory_; }

  // Compiled programs and their feeds for one stage part.
  struct Part {
    const PartDef* def = nullptr;
    std::unique_ptr<Program> forward;
    std::unique_ptr<Program> backward;
    std::vector<int> fed_args;  // Arguments the part reads, fed.
    // Stage 0's first part: where its forward fetches the element its
    // InfeedDequeue node took (-1: it takes none).
    int element_fetch = -1;
    bool enqueues = false;          // Its forward runs the OutfeedEnqueue node.
    std::vector<Output> stash;      // Forward values the backward is fed.
    std::vector<int> dy_outputs;    // Outputs with a dy placeholder.
    std::vector<int> grad_args;     // Arguments whose gradient is fetched.
    int64_t stash_bytes = 0;        // One micro-batch.
    int64_t output_bytes = 0;       // One micro-batch's outputs.
    int64_t grad_bytes = 0;         // One micro-batch's float outputs.
    Channel* stash_fifo = nullptr;  // Training: its stash (sized lists).
  };
  // One work item of one part (a WorkListItem's tag indexes entries_).
  struct Entry {
    WorkItem item;
    int part = 0;
    int step = 0;
    int ipu = 0;
    bool ends_step = false;  // The last of its step on its IPU's list.
  };
  // State of one Run (clocks, errors, measurements).
  struct RunState;

 private:
  PipelineRuntime() = default;
  absl::Status Compile();
  absl::Status CompilePart(Part& part);
  // The work lists: the table's items per IPU, their channels sized.
  void LowerToWorkLists();
  absl::Status AccountPrograms(std::vector<IpuMemory>* mem);
  void AccountBuffers(std::vector<IpuMemory>* mem) const;
  absl::Status AccountMemory();
  Channel* Fifo(const std::string& key) const { return lists_->channel(key); }
  // IPU `k` of this replica.
  IPUDevice& Device(int k) const {
    return system_->device(replica_.index * num_ipus_ + k);
  }

  absl::Status RunOnce(RunState& rs, int repeat);
  // What one work-list item does (WorkLists::ItemFn).
  absl::Status RunItem(RunState& rs, int repeat, const WorkListItem& item,
                       std::vector<ChannelMessage>& popped,
                       std::vector<ItemPush>* pushes, WorkItemClock* clock);
  using ItemClock = WorkItemClock;
  absl::Status Forward(RunState& rs, const Entry& e,
                       std::vector<ChannelMessage>& popped,
                       std::vector<ItemPush>* pushes, ItemClock* clock);
  absl::Status Backward(RunState& rs, const Entry& e,
                        std::vector<ChannelMessage>& popped,
                        std::vector<ItemPush>* pushes, ItemClock* clock);
  // Counts activations or gradients sent between IPUs.
  void SentToIpu(RunState& rs, int from, int64_t bytes);
  absl::Status WeightUpdate(RunState& rs);
  absl::Status StreamOptimizerState(bool in, RunState& rs);
  // After a repeat: settles each micro-batch's TakenElements. Completed
  // micro-batches (all of them once the weight update began; on a stop,
  // those whose values reached the outfeed) are committed, the failing
  // one's count as used, the others' go back to the infeed, newest first.
  void SettleTaken(RunState& rs, bool stopped);
  PipelineReport MakeReport(RunState& rs);

  const BuiltPipeline* b_ = nullptr;
  IPUSystem* system_ = nullptr;
  Replica replica_;
  uint64_t generation_ = 0;
  bool recompute_ = false;
  int num_ipus_ = 0;
  std::vector<std::vector<std::unique_ptr<Part>>> parts_;  // [stage][part]
  std::vector<Entry> entries_;  // By WorkListItem::tag.
  std::unique_ptr<WorkLists> lists_;
  std::vector<RunEnv> envs_;  // Per IPU.
  RunEnv update_env_;         // IPU 0's, posting each IPU's part of the update.
  // CPU seconds each IPU spent in the current weight update; element k is
  // written only by IPU k's thread (RunEnv::post_to_shard), read after the
  // update's program returned.
  std::vector<double> update_hop_cpu_;
  std::unique_ptr<Program> weight_update_;
  // Offloaded optimizer state: per IPU, variable names; values between
  // updates live in remote_ (this replica's shard of it, for names in
  // sharded_).
  std::vector<std::vector<std::string>> offloaded_;
  std::map<std::string, Tensor> remote_;
  std::map<std::string, TensorShape> sharded_;  // Name -> full shape.
  // ZeRO-1: the shard fed to each of b_->weight_shards ({r, R} when all the
  // weight's state is in sharded_, else {0, 1}), and the state its sharded
  // updates load as this replica's chunk only (RemoteState's rule).
  std::vector<Tensor> weight_shards_;
  std::set<std::string> chunked_;
  std::vector<int64_t> always_live_;  // Per IPU, as run.
  std::vector<int64_t> peak_arena_;   // Per IPU.
  std::vector<int64_t>
      offloaded_bytes_;            // Per IPU, in this replica's remote memory.
  std::vector<IpuMemory> memory_;  // Per IPU of the replica.
};

}  // namespace ipuflow::pipelining

#endif  // IPUFLOW_PIPELINING_PIPELINE_RUNTIME_H_
