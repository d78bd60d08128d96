// WorkLists: the device layer's engine for computations that keep several
// IPUs of a replica busy at once (a pipeline's stages). Each IPU gets a
// list of items, run in order on its worker thread. An item is data: the
// channels it pops, the channels it pushes (resolved to the channels once,
// when they are sized) and its time step; the engine pops its inputs from
// those bounded channels, hands them to the item function (which runs the
// item's compiled Program on its IPU) and pushes what it returns to the
// channels read by items on the same or other IPUs. The lists
// come from a schedule table (what runs at each time step on which IPU);
// the engine knows nothing of stages or passes, only items, channels and
// steps. What an item runs, given as data, is work_list_program.h's
// (the item function it hands this engine); this file runs the lists.
//
//   WorkLists lists(devices, {{item(0, "F0"), ...}, ...}, /*lockstep=*/false);
//   lists.SizeChannels();          // capacities from the lists, step by step
//   WorkListsRun run(cancel, lists.num_ipus());
//   RETURN_IF_ERROR(lists.Run(run, [&](const WorkListItem& it,
//                                      std::vector<ChannelMessage>& popped,
//                                      std::vector<ItemPush>* pushes,
//                                      WorkItemClock* clock) { ... }));
//
// Channels carry ChannelMessages stamped with their producer's virtual end
// time; each IPU has a virtual clock advanced by the thread CPU time of
// each item and held back by its inputs' stamps, so timelines show what N
// IPUs would do on a host with fewer cores.
//
// Why bounded channels cannot deadlock: every IPU runs a fixed order, so
// the lists form a Kahn process network whose outcome does not depend on
// timing; SizeChannels gives each channel the peak occupancy of one valid
// execution (every step's items in order, pops at an item's start, pushes
// at its end), which therefore never blocks a writer, hence no execution
// does. With `lockstep`, an item of step t also waits until every item of
// step t-1 has finished everywhere (Sequential schedules).
//
// Errors: the first error stops the run: every channel and every wait of
// the run is cancelled through the run's CancellationManager, and Run
// returns the root cause (in preference to the Cancelled it caused), with
// the failing item's label in front.
//
// Ownership: the devices are not owned and must outlive the lists; the
// lists own their channels. Thread safety: one Run at a time.
#ifndef IPUFLOW_CORE_IPU_WORK_LISTS_H_
#define IPUFLOW_CORE_IPU_WORK_LISTS_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/cancellation.h"
#include "core/ipu/bounded_queue.h"
#include "core/ipu/ipu_device.h"
#include "core/mutex.h"
#include "core/tensor.h"

namespace ipuflow {

// CPU seconds used by the calling thread (the virtual clocks' unit).
double ThreadCpuSeconds();

// Runs `work` on `device`'s thread and waits for it; inline when the caller
// is that thread (a kernel running on the IPU that the work targets).
void RunOnDevice(IPUDevice& device, const std::function<void()>& work);

struct ChannelMessage {
  std::vector<Tensor> values;
  double virtual_time = 0;  // Producer's virtual end time, seconds.
};
using Channel = BoundedQueue<ChannelMessage>;

// What an item function returns for one of its item's pushes.
struct ItemPush {
  std::vector<Tensor> values;
  // Stamped with the item's virtual end; false: with 0, a hand-over that
  // does not hold its reader back on the virtual clock.
  bool timed = true;
};

// One item of an IPU's list.
struct WorkListItem {
  int ipu = 0;    // Index of the IPU within the replica's devices.
  int step = 0;   // The schedule's time step (lockstep barriers).
  int tag = 0;    // The caller's: which item this is (for its item function).
  int order = 0;  // Position in the table's order (SizeChannels replays it).
  // Channels the item pops (before its function runs) and pushes (after),
  // in this order; SizeChannels sizes and resolves them.
  std::vector<std::string> pops;
  std::vector<std::string> pushes;
  // Put in front of the item's errors ("stage1 (IPU 0) forward,
  // micro-batch 3"); empty when the item function names itself.
  std::string label;
};

// When one item could start and what it cost; the item function sets it.
// The engine sets the first and the third, the item function the second.
struct WorkItemClock {
  double virtual_ready = 0;  // Latest input's virtual end (or the barrier).
  double cpu = 0;            // Seconds the item adds to its IPU's clock.
  double wall_start = 0;     // When its inputs were there (run's wall clock).
};

// One item as it ran, on the virtual and wall clocks.
struct WorkItemTiming {
  int index = 0;                        // Position in its IPU's list.
  double start = 0, end = 0;            // Virtual.
  double wall_start = 0, wall_end = 0;  // Wall, since the run started.
};

// The state of one run, shared by the IPUs' threads. A caller may derive
// from it to keep its own per-run state beside.
struct WorkListsRun {
  WorkListsRun(std::shared_ptr<CancellationManager> cancel, int num_ipus);
  virtual ~WorkListsRun() = default;

  std::shared_ptr<CancellationManager> cancel;
  std::chrono::steady_clock::time_point wall0;
  // Written only by IPU k's thread during Run, read after it.
  std::vector<double> vclock;
  std::vector<std::vector<WorkItemTiming>> timings;  // Per IPU.
  Mutex mu;
  CondVar cv;
  absl::Status status ABSL_GUARDED_BY(mu);
  // The failing item (its IPU and position), -1 when none failed.
  int failed_ipu ABSL_GUARDED_BY(mu) = -1;
  int failed_index ABSL_GUARDED_BY(mu) = -1;
  std::vector<int> step_remaining ABSL_GUARDED_BY(mu);
  std::vector<double> step_end ABSL_GUARDED_BY(mu);

  // Seconds since the run started, on the wall clock.
  double WallSeconds() const;
  // Between runs of the lists: every IPU waits for the last one (the
  // latest virtual clock), then IPU k works `seconds[k]` more (empty:
  // none), e.g. its part of a weight update. Returns the longest of them.
  double Meet(const std::vector<double>& seconds = {});
  // Stops the run with `s` (a root cause replaces an earlier Cancelled);
  // wakes every wait of the run with Cancelled "run cancelled: <who>
  // failed: ..." (`who`: "replica 1").
  void Abort(const absl::Status& s, const std::string& who, int ipu = -1,
             int index = -1);
  absl::Status Status();
};

class WorkLists {
 public:
  // What one item does between its pops and its pushes (runs its program):
  // `popped` holds one message per item.pops, in order; it fills `pushes`
  // with one entry per item.pushes, in order, and sets clock->cpu. Called
  // on the item's IPU thread.
  using ItemFn = std::function<absl::Status(
      const WorkListItem&, std::vector<ChannelMessage>& popped,
      std::vector<ItemPush>* pushes, WorkItemClock*)>;

  // `devices[k]`: the IPU that runs list k. `lists[k]`: its items, in
  // order, with non-decreasing steps.
  WorkLists(std::vector<IPUDevice*> devices,
            std::vector<std::vector<WorkListItem>> lists, bool lockstep);

  int num_ipus() const { return static_cast<int>(lists_.size()); }
  const std::vector<std::vector<WorkListItem>>& lists() const { return lists_; }
  IPUDevice& device(int k) const { return *devices_[k]; }
  int num_steps() const { return static_cast<int>(step_sizes_.size()); }

  // Creates every channel the items use, each sized to its peak occupancy
  // when all items run one at a time by `order` (pops at an item's start,
  // pushes at its end; at least 1), and resolves each item's channels; see
  // the file comment.
  void SizeChannels();
  // The capacity SizeChannels gives each channel of `lists` (a pure
  // function of the lists: known before any device runs them).
  static std::map<std::string, int> Capacities(
      const std::vector<std::vector<WorkListItem>>& lists);
  // Dies if there is no such channel (a lowering bug).
  Channel* channel(const std::string& key) const;
  const std::map<std::string, std::unique_ptr<Channel>>& channels() const {
    return channels_;
  }
  // Empties every channel (before a run); Run does not.
  void ResetChannels();
  // Cancelling `cancel` cancels every channel: tokens to Unregister.
  std::vector<int> CancelChannelsWith(
      const std::shared_ptr<CancellationManager>& cancel);

  // Runs every list once, each on its IPU's thread (the calling thread's
  // own IPU inline), and waits for all. On an item error, aborts `run`
  // (naming `who` and the item's label) and returns the root cause.
  // `run.vclock` starts where it is; per IPU, each item's timing is
  // appended to run.timings.
  absl::Status Run(WorkListsRun& run, const ItemFn& fn, const std::string& who);

 private:
  void RunList(WorkListsRun& run, int k, const ItemFn& fn,
               const std::string& who);

  std::vector<IPUDevice*> devices_;
  std::vector<std::vector<WorkListItem>> lists_;
  bool lockstep_;
  std::vector<int> step_sizes_;  // Items per time step.
  std::map<std::string, std::unique_ptr<Channel>> channels_;
  // Per IPU, per item: its pops' and pushes' channels (SizeChannels).
  struct ItemChannels {
    std::vector<Channel*> pops, pushes;
  };
  std::vector<std::vector<ItemChannels>> resolved_;
};

}  // namespace ipuflow

#endif  // IPUFLOW_CORE_IPU_WORK_LISTS_H_
