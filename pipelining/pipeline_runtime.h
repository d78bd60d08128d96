// PipelineRuntime: a built pipeline (pipeline_internal.h) lowered to the
// device layer's work lists (core/ipu/work_lists.h) for one replica on an
// IPU system. Replica r of a pipeline whose stages use S IPUs runs on IPUs
// [r*S, r*S + S), reads its own infeed elements (element i goes to replica
// i % R) and pushes to its outfeed ring; its weight update meets the other
// replicas' in the collectives of a CrossReplicaOptimizer.
//
// Lowering (pipeline_compile.cc): the layout's work lists
// (pipeline_programs.h) on the replica's IPUs, their channels sized; the
// programs are the frame node's sub-programs, compiled with the device
// program (one set per replica's program) and handed to Run.
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
//    as the others where the update's edges allow); with offloading, the
//    programs of the RemoteState's load and store nodes run before and
//    after it, as a loop's nodes bracket its update (core/ipu/
//    remote_state.h; the load's ZeRO-1 shards are fed to the update).
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

#include <atomic>
#include <memory>
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
#include "pipelining/pipeline_programs.h"
#include "pipelining/pipeline_report.h"
#include "pipelining/trace.h"

namespace ipuflow::pipelining {

class PipelineRuntime {
 public:
  // Which replica a runtime runs, and the replicas' collectives.
  struct Replica {
    int index = 0;  // Local (this process's), as `count`.
    int count = 1;
    // The device program's (not owned; what its RemoteStates' plans are
    // keyed by). Spans the processes of a multi-process run
    // (core/ipu/process_link.h).
    CollectiveGroup* group = nullptr;
  };
  // `built`, `system` and the group are not owned and must outlive the
  // runtime. `memory`: what each IPU of a replica holds (the device
  // program's plan, offloaded state placed), for the report.
  static absl::StatusOr<std::unique_ptr<PipelineRuntime>> Create(
      const BuiltPipeline* built, std::shared_ptr<const PipelineLayout> layout,
      IPUSystem* system, Replica replica, std::vector<IpuMemory> memory);
  ~PipelineRuntime();

  // repeat_count pipeline runs of `programs` (the frame node's
  // sub-programs in this replica's program, pipeline_programs.h's roles).
  // `inputs`: the values of options.inputs (the frame node's inputs).
  // `cancel`: the device program's run (shared by the replicas of one
  // Execute; the system's cancellation cancels it) stops the run.
  // `taken`: the enclosing device loop iteration's record (RunEnv::taken),
  // which gets the infeed elements of the micro-batches that completed; null
  // outside a loop.
  absl::StatusOr<PipelineReport> Run(
      SubPrograms& programs, const std::vector<Tensor>& inputs,
      std::shared_ptr<CancellationManager> cancel,
      TakenElements* taken = nullptr);

  IPUSystem* system() const { return system_; }
  // The IPUs one replica uses (max device index + 1).
  int num_ipus() const { return num_ipus_; }
  uint64_t generation() const { return generation_; }

  // One stage part: its layout and, during a Run, its programs.
  struct Part : PartProgram {
    Program* forward = nullptr;
    Program* backward = nullptr;    // Null: none.
    Channel* stash_fifo = nullptr;  // Training: its stash (sized lists).
  };
  using Entry = PartItem;
  // State of one Run (clocks, errors, measurements), defined below.
  struct RunState;

 private:
  PipelineRuntime() = default;
  absl::Status Init();
  // Finds this run's programs among `programs` (FailedPrecondition when
  // they were compiled for another layout).
  absl::Status BindPrograms(SubPrograms& programs);
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
  // Bytes this replica's IPUs moved to and from remote memory so far.
  int64_t RemoteBytes() const;
  // After a repeat: settles each micro-batch's TakenElements. Completed
  // micro-batches (all of them once the weight update began; on a stop,
  // those whose values reached the outfeed) are committed, the failing
  // one's count as used, the others' go back to the infeed, newest first.
  void SettleTaken(RunState& rs, bool stopped);
  PipelineReport MakeReport(RunState& rs);

  const BuiltPipeline* b_ = nullptr;
  std::shared_ptr<const PipelineLayout> layout_;
  IPUSystem* system_ = nullptr;
  Replica replica_;
  uint64_t generation_ = 0;
  bool recompute_ = false;
  int num_ipus_ = 0;
  std::vector<std::vector<Part>> parts_;         // [stage][part]
  const std::vector<Entry>* entries_ = nullptr;  // By WorkListItem::tag.
  std::unique_ptr<WorkLists> lists_;
  std::vector<RunEnv> envs_;  // Per IPU.
  RunEnv update_env_;         // IPU 0's, posting each IPU's part of the update.
  // CPU seconds each IPU spent in the current weight update; element k is
  // written only by IPU k's thread (RunEnv::post_to_shard), read after the
  // update's program returned.
  std::vector<double> update_hop_cpu_;
  // During a Run, in training; the offloaded state's load and store
  // programs only with offloading.
  Program* weight_update_ = nullptr;
  Program* load_state_ = nullptr;
  Program* store_state_ = nullptr;
  std::vector<IpuMemory> memory_;  // Per IPU of the replica.
};

// The state of one PipelineRuntime::Run: clocks, errors, measurements
// (MakeReport, pipeline_runtime_report.cc, reads them).
struct PipelineRuntime::RunState : WorkListsRun {
  RunState(std::shared_ptr<CancellationManager> c, int num_ipus)
      : WorkListsRun(std::move(c), num_ipus) {}
  std::vector<std::vector<TimedItem>> items, wall_items;  // Per IPU.
  std::vector<std::vector<double>> cpu_sum;  // [stage*2+pass][part]
  std::vector<std::vector<int>> cpu_count;
  // [ipu][stage]: stash occupancy at the IPU's step boundaries.
  std::vector<std::vector<int>> stash_occupancy;
  std::vector<std::pair<double, double>> spans;  // Per repeat: F/B span.
  double weight_update_seconds = 0;
  std::vector<Tensor> input_values;
  std::atomic<int64_t> ipu_to_ipu{0}, host_to_device{0};
  int64_t streamed = 0;  // To and from remote memory.
  // Per micro-batch of the repeat in progress: what stage 0's first part's
  // InfeedDequeue node took (core/taken_elements.h, as a loop iteration's),
  // settled after the lists ran (SettleTaken); how many micro-batches
  // reached the outfeed, which one failed, and whether the weight update
  // began.
  std::vector<std::unique_ptr<TakenElements>> taken;
  TakenElements* parent_taken = nullptr;  // The enclosing loop's, or null.
  std::atomic<int> delivered{0};
  int failed_micro_batch ABSL_GUARDED_BY(mu) = -1;
  bool updating = false;
};

}  // namespace ipuflow::pipelining

#endif  // IPUFLOW_PIPELINING_PIPELINE_RUNTIME_H_
