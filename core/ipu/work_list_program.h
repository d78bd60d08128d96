// WorkListProgram: one replica's run of a DeviceFrame whose computation is
// work lists (core/ipu/work_lists.h) of sub-program runs, given as data (a
// pipeline's stage parts: pipelining/pipeline_programs.h emits the data).
// Each item names the frame node's sub-program it runs, where each of that
// program's feeds comes from (a value of a message it popped, a run input,
// one of its own constants) and what each of its pushes carries (feeds or
// fetches of the run), every value by name; Create resolves the names to
// positions once. The device layer pops, runs and pushes; nothing outside
// core/ipu runs an item.
//
//   WorkListProgram::Create(spec, system, {replica, replicas, group})
//   Run(programs, inputs, cancel, taken), per Execute:
//     repeat `spec.repeats` times:
//       every IPU's list once (the IPUs meet first);
//       then the epilogue from IPU 0's thread: each program fed the
//       previous one's fetches (an offloaded state's load, the weight
//       update, the store; core/ipu/remote_state.h), each IPU running its
//       own shard of it (PostToShards), its CPU time on that IPU's clock;
//     returns what it measured (WorkListRecord) for the frame's report.
//
// Iterations and the infeed (core/taken_elements.h): a run of the lists is
// `spec.iterations` iterations (micro-batches). The InfeedDequeue node of
// an item with records_taken records its element in its iteration's
// TakenElements; after each run, completed iterations (all once the
// epilogue began; on a stop, those an item's `completes` marked done,
// i.e. whose values reached the outfeed) are committed to the enclosing
// loop's record, the failing one's elements count as used, and the others
// go back to the infeed, newest first: the stream goes on where the
// stopped run's results end (docs/RELIABILITY.md, "Feeds").
//
// Errors: the first error cancels every channel and queue wait of the run
// (the device program's cancellation, shared by the replicas); Run returns
// the root cause with the failing item's label and run in front.
//
// Ownership: the spec is shared with the frame that laid it out; the
// system and group are not owned and must outlive the program. Thread
// safety: Run must not be called concurrently with itself; it may be called
// from the replica's first IPU thread (the frame node's kernel), whose list
// then runs on the calling thread.
#ifndef IPUFLOW_CORE_IPU_WORK_LIST_PROGRAM_H_
#define IPUFLOW_CORE_IPU_WORK_LIST_PROGRAM_H_

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/ipu/collective_group.h"
#include "core/ipu/ipu_system.h"
#include "core/ipu/work_lists.h"
#include "core/program.h"
#include "core/taken_elements.h"

namespace ipuflow {

// One value an item feeds its program or pushes, found by name: a name is
// the Output::name() ("node:0") of a value of the graph the frame's
// programs come from, so a value is found where it is instead of at a
// position that must agree with the orders of the program's feeds, of its
// fetches and of what every pusher of a channel appended.
struct ItemValue {
  enum class From {
    kInput,     // The run input `name` (WorkListSpec::inputs).
    kPopped,    // Value `name` of the message popped from `channel`.
    kConstant,  // The item's constant `name`.
    kFed,       // Its program's feed `name` (pushes only).
    kFetched,   // Its program's fetch `name` (pushes only).
  };
  From from = From::kInput;
  std::string name;
  std::string channel;  // kPopped only: one of the item's pops.
};

// The value of one feed of an item's program (`feed`, its name): the sum
// of the terms (the gradients of an output from every part reading it),
// or, when none holds a value, zeros of `zeros_dtype` and `zeros_shape`.
struct ItemFeed {
  std::string feed;
  std::vector<ItemValue> terms;
  std::optional<DType> zeros_dtype;
  TensorShape zeros_shape;
};

// What one of an item's pushes carries, in order; a value is known in the
// channel by its ItemValue::name (every item pushing to one channel sends
// the same names, in the same order).
struct ItemPushValues {
  std::vector<ItemValue> values;
  // False: stamped 0, a hand-over that does not hold its reader back on
  // the virtual clock.
  bool timed = true;
  // What the bytes pushed count as (TransferCounters), on IPU
  // `counted_ipu` of the replica: the sender's for IPU-to-IPU traffic, the
  // receiver's for an infeed element handed on.
  enum class Transfer { kNone, kIpuToIpu, kHostToDevice };
  Transfer transfer = Transfer::kNone;
  int counted_ipu = 0;
};

// One item's program run, by WorkListItem::tag.
struct ItemProgram {
  std::string role;  // The sub-program it runs; empty: none runs.
  // One per feed of the program (none when no program runs), any order.
  std::vector<ItemFeed> feeds;
  std::vector<ItemPushValues> pushes;       // One per WorkListItem::pushes.
  std::map<std::string, Tensor> constants;  // The micro-batch index.
  int iteration = 0;                        // Of the run's iterations.
  // Its InfeedDequeue node records in its iteration's TakenElements.
  bool records_taken = false;
  // Once it ran: iterations [0, completes) reached the outfeed.
  int completes = 0;
  // Seconds it adds to its IPU's virtual clock; < 0: its thread CPU time.
  double cost = -1;
  // Channels whose occupancy is recorded as it is once its pushes are in
  // (only its IPU's items use them).
  std::vector<std::string> observes;
  std::string label;  // "stage 1 (IPU 1) forward, micro-batch 3".
};

// The feeds and fetches a role's program is compiled with (its
// ProgramSpec's), which the items' names are resolved against.
struct ItemProgramSignature {
  std::vector<Output> feeds;
  std::vector<Output> fetches;
};

struct WorkListSpec {
  std::string name;                              // In errors: "pipeline 'p'".
  std::vector<std::vector<WorkListItem>> lists;  // Per IPU of a replica.
  std::vector<ItemProgram> items;                // By WorkListItem::tag.
  bool lockstep = false;
  int iterations = 1;               // Per run of the lists.
  int repeats = 1;                  // Runs per Run.
  std::vector<std::string> inputs;  // The run inputs' names, in order.
  // By role: every role an item runs.
  std::map<std::string, ItemProgramSignature> programs;
  // Roles run after each run of the lists, in order, each fed the
  // previous one's fetches.
  std::vector<std::string> epilogue;
  bool modelled_costs = false;  // The epilogue adds no virtual time.
};

// What one Run measured.
struct WorkListRecord {
  // Per IPU, every item as it ran, runs in order (a list's items run once
  // per run).
  std::vector<std::vector<WorkItemTiming>> timings;
  std::vector<double> vclock;  // Per IPU, at the end.
  double wall_seconds = 0;
  double epilogue_seconds = 0;  // Virtual, over the runs.
  // Counted on the replica's IPUs during Run (TransferCounters).
  int64_t ipu_to_ipu_bytes = 0;
  int64_t host_to_device_bytes = 0;
  int64_t remote_bytes = 0;
  // Peak occupancy of each observed channel.
  std::map<std::string, int> observed;
};

namespace work_list_internal {
struct ResolvedItem;  // work_list_program.cc
}  // namespace work_list_internal

class WorkListProgram {
 public:
  struct Replica {
    int index = 0;  // Local (this process's), as `count`.
    int count = 1;
    // The device program's collectives (not owned); spans the processes
    // of a multi-process run (core/ipu/process_link.h).
    CollectiveGroup* group = nullptr;
  };
  // Resolves every name to a position once. InvalidArgument, naming the
  // item and the value, when the spec refers to what does not exist (a
  // value no input, channel, constant, feed or fetch has; a program feed
  // no item feed fills; a role without a signature; a list item's tag out
  // of range) or when a channel is pushed and popped a different number
  // of times per run, or with other values; FailedPrecondition when the
  // system has no IPUs for the replica.
  static absl::StatusOr<std::unique_ptr<WorkListProgram>> Create(
      std::shared_ptr<const WorkListSpec> spec, IPUSystem* system,
      Replica replica);
  ~WorkListProgram();

  // `programs`: the frame node's sub-programs in this replica's program,
  // by role (FailedPrecondition when one was compiled with other feeds or
  // fetches than the spec's signature).
  // `inputs`: the frame node's inputs. `cancel`: the device program's run.
  // `taken`: the enclosing loop iteration's record, or null.
  absl::StatusOr<WorkListRecord> Run(
      SubPrograms& programs, const std::vector<Tensor>& inputs,
      std::shared_ptr<CancellationManager> cancel,
      TakenElements* taken = nullptr);

  const WorkListSpec& spec() const { return *spec_; }
  // Channels' capacities and peaks, for the report.
  const WorkLists& lists() const { return *lists_; }
  IPUDevice& device(int k) const;
  int num_ipus() const { return static_cast<int>(spec_->lists.size()); }

 private:
  struct RunState;
  WorkListProgram() = default;
  absl::Status BindPrograms(SubPrograms& programs, RunState& rs) const;
  absl::Status RunOnce(RunState& rs, int repeat);
  absl::Status RunItem(RunState& rs, int repeat, const WorkListItem& w,
                       std::vector<ChannelMessage>& popped,
                       std::vector<ItemPush>* pushes, WorkItemClock* clock);
  // After a successful item: the iterations it completed, the occupancy
  // of the channels it observes.
  void Completed(RunState& rs, const WorkListItem& w,
                 const ItemProgram& item) const;
  absl::Status RunEpilogue(RunState& rs);
  void SettleTaken(RunState& rs, bool stopped);

  std::shared_ptr<const WorkListSpec> spec_;
  IPUSystem* system_ = nullptr;
  Replica replica_;
  std::unique_ptr<WorkLists> lists_;
  // By tag: each item with its names resolved to positions.
  std::vector<work_list_internal::ResolvedItem> resolved_;
  std::vector<RunEnv> envs_;  // Per IPU.
  RunEnv epilogue_env_;       // IPU 0's, posting each IPU's shard.
  // CPU seconds each IPU spent in the current epilogue; element k is
  // written only by IPU k's thread, read after the epilogue returned.
  std::vector<double> epilogue_cpu_;
  // Per tag, the observed channels, resolved, with how many of the
  // item's pushes go to each.
  std::vector<std::vector<std::pair<Channel*, int>>> observes_;
};

}  // namespace ipuflow

#endif  // IPUFLOW_CORE_IPU_WORK_LIST_PROGRAM_H_
