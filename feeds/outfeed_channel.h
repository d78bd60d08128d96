// Internal to IPUOutfeedQueue (feeds/outfeed_queue.h): the channel between
// the device and the host, which the queue, the graph (weakly) and a running
// OutfeedEnqueue kernel share. Split out so the queue's public surface reads
// apart from the rings, the host-side list and the output-mode bookkeeping.
#ifndef IPUFLOW_FEEDS_OUTFEED_CHANNEL_H_
#define IPUFLOW_FEEDS_OUTFEED_CHANNEL_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/cancellation.h"
#include "core/fed_resource.h"
#include "core/graph.h"
#include "core/ipu/bounded_queue.h"
#include "core/ipu/spin_wait.h"
#include "core/lifetime_gate.h"
#include "core/mutex.h"
#include "core/scope.h"
#include "feeds/outfeed_result.h"
#include "feeds/output_mode.h"

namespace ipuflow {
class IPUDevice;
}  // namespace ipuflow

namespace ipuflow::feeds::internal {

// Next's spin before it sleeps, and the rings' (device side): adaptive
// (spin_wait.h's AdaptiveSpin), about twice the time the other side took to
// answer recently, between these bounds. A round trip (host -> device ->
// host) then hands over without a futex wake-up on either side while both
// are busy; an idle device costs a waiting reader one floor of spinning.
// A fixed 20 us spin doubled the round trip on a busy 2-vCPU machine (the
// spinning reader kept the core the device needed); spins now also yield
// every few microseconds (BoundedQueue::kSpinYieldEvery).
constexpr std::chrono::nanoseconds kFeedSpinFloor =
    std::chrono::microseconds(5);
constexpr std::chrono::nanoseconds kFeedSpinCeiling =
    std::chrono::microseconds(20);
constexpr std::chrono::nanoseconds kNextYieldEvery =
    std::chrono::microseconds(1);

// Everything behind an IPUOutfeedQueue: one bounded queue per replica that
// the device pushes to, and the host-side list of steps. A step moves from
// the rings to the list on the thread that completes it (the last replica
// to push, or the reader that makes room): no gathering thread, one hop
// fewer between the device and Next.
// Shared: the IPUOutfeedQueue owns it, the graph refers to it weakly, and a
// kernel inside Push holds it.
class OutfeedChannel : public HostResource, public FedResource {
 public:
  OutfeedChannel(std::string id, OutputMode output_mode, OutfeedMode mode,
                 int buffer_depth, int64_t max_host_bytes)
      : output_mode_(output_mode),
        mode_(mode),
        buffer_depth_(buffer_depth),
        max_host_bytes_(max_host_bytes),
        id_(std::move(id)) {}
  ~OutfeedChannel() override { Shutdown(); }

  std::string DebugString() const override {
    return absl::StrCat("IPUOutfeedQueue '", id_, "'");
  }
  absl::Status Prepare(int num_replicas, bool training) override {
    return Start(num_replicas, training);
  }
  absl::Status RunFinished() override;
  void RunStopped(const absl::Status& status) override;
  // Executables that can push to the queue; when the last goes, readers
  // waiting in Next (and later Nexts, until another comes) get Cancelled
  // naming why.
  void AddProducer() override;
  void RemoveProducer(const absl::Status& why) override;
  OutfeedMode mode() const { return mode_; }
  OutputMode output_mode() const { return output_mode_; }

  Node* Enqueue(const Scope& scope,
                const std::vector<std::pair<std::string, Output>>& values,
                const OutfeedIteration& iteration);
  absl::Status Start(int num_replicas, bool training = false);
  // Groups the pushes into iterations (`group`), applies the output mode,
  // then Send; true if the values were sent now.
  absl::StatusOr<bool> Push(int replica, int num_replicas,
                            std::vector<Tensor> values,
                            CancellationManager* cancellation,
                            int64_t iteration, IPUDevice* device,
                            const OutfeedIteration& group = {});
  absl::StatusOr<OutfeedResult> Dequeue();
  absl::StatusOr<OutfeedElement> Next();
  std::vector<OutfeedElement> TakeAvailable();
  void Close();
  int64_t steps_delivered() const;
  int64_t host_bytes() const;
  int64_t peak_host_bytes() const;
  int waiting_readers() const {
    MutexLock l(&mu_);
    return waiting_readers_;
  }
  int waiting_pushes() const {
    if (started_replicas_.load(std::memory_order_acquire) == 0) return 0;
    int n = 0;
    for (const auto& q : queues_) n += q->sleeping_producers();
    return n;
  }
  // Wakes every thread waiting on the queue with Cancelled; later Starts
  // fail.
  void Shutdown();

  // Callers inside the IPUOutfeedQueue's methods: its destructor closes it
  // and waits for them to leave (Shutdown has woken them).
  LifetimeGate& callers() { return callers_; }

 private:
  // A step, or (stop non-OK) the end of a run that stopped with an error.
  struct Entry {
    OutfeedElement step;
    int64_t bytes = 0;
    absl::Status stop;
  };
  // Moves every complete step (an element in every replica's ring) from
  // the rings to the host-side list, in order, until the list is full. Run
  // by whoever may have made a step gatherable: a producer after its push,
  // a reader after it made room, Close. No thread of its own: a step
  // reaches Next without a hop.
  void GatherLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Into replica's ring (the device waits while it is full); the bytes
  // count as `device`'s device-to-host traffic (if not null).
  absl::Status Send(int replica, std::vector<Tensor> values,
                    CancellationManager* cancellation, IPUDevice* device);
  // What a replica holds during a run under Final / Sum / EveryN: touched
  // by its replica's thread during the run, by the host after it.
  struct Held {
    int64_t iterations = 0;  // Device iterations seen this run.
    int64_t pushes = 0;      // Grouped pushes (OutfeedIteration) this run.
    std::vector<Tensor> group_sum;  // The current iteration's, when summed.
    std::vector<Tensor> values;
    IPUDevice* device = nullptr;  // Where the values come from.
  };
  void ResetHeld();
  absl::StatusOr<OutfeedElement> MakeStep(
      std::vector<std::vector<Tensor>> per_replica) const;
  absl::Status CheckValues(const std::vector<Tensor>& values) const;
  void Append(Entry e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Appends the stop markers whose steps have all been gathered.
  void FlushStops() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool Full() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return mode_ == OutfeedMode::kAll && !steps_.empty() &&
           host_bytes_ >= max_host_bytes_;
  }
  // Steps whose elements every replica has pushed.
  int64_t CompleteSteps() const;
  // Gathers every step whose elements all replicas have pushed (or until
  // the host list is full): what a program enqueued before it returned is
  // visible to the next host-side read.
  void CatchUp() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { GatherLocked(); }
  // Wakes readers in Next, if any (steps_ changed, or the queue ended).
  // Inside Send the signal waits until mu_ is released (wake_deferred_),
  // so the reader does not wake only to block on mu_.
  void WakeReaders() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Removes and returns the steps (not stop markers) at the front.
  std::vector<Entry> TakeSteps() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status Destroyed() const {
    return absl::CancelledError(
        absl::StrCat("IPUOutfeedQueue '", id_, "' was destroyed"));
  }

  const OutputMode output_mode_;
  // output_mode_ with Default resolved (by Start's `training`).
  std::atomic<OutputMode::Kind> kind_{OutputMode::Kind::kAll};
  std::vector<Held> held_;  // Per replica; sized by Start.
  const OutfeedMode mode_;
  const int buffer_depth_;
  const int64_t max_host_bytes_;
  const std::string id_;
  // Set by Enqueue while building, before any program runs.
  std::vector<std::string> names_;
  std::vector<DType> dtypes_;
  std::vector<TensorShape> shapes_;
  bool enqueued_ = false;

  mutable Mutex mu_;
  CondVar cv_;
  int num_replicas_ ABSL_GUARDED_BY(mu_) = 0;
  std::deque<Entry> steps_ ABSL_GUARDED_BY(mu_);
  int64_t host_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t peak_host_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  // Stops waiting for `first` steps to be gathered.
  std::deque<std::pair<int64_t, absl::Status>> pending_stops_
      ABSL_GUARDED_BY(mu_);
  std::atomic<bool> closed_{false};
  bool destroyed_ ABSL_GUARDED_BY(mu_) = false;
  // Executables that can push now; why the last one went (OK: none went
  // since the last came, or none ever came: Next waits for one).
  int producers_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status orphaned_ ABSL_GUARDED_BY(mu_);
  bool Orphaned() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return producers_ == 0 && !orphaned_.ok();
  }
  // steps_.size(), destroyed_ and Orphaned(), for Next's spin (decided
  // under mu_).
  std::atomic<size_t> steps_hint_{0};
  std::atomic<bool> destroyed_hint_{false};
  std::atomic<bool> orphaned_hint_{false};
  LifetimeGate callers_;
  int waiting_readers_ ABSL_GUARDED_BY(mu_) = 0;  // Callers inside Next.
  // When steps last came for a waiting reader (NowNs): a slept Next's
  // answer time, for next_spin_.
  int64_t readers_answered_ns_ ABSL_GUARDED_BY(mu_) = 0;
  bool defer_wake_ ABSL_GUARDED_BY(mu_) = false;
  bool wake_deferred_ ABSL_GUARDED_BY(mu_) = false;
  AdaptiveSpin next_spin_{kFeedSpinFloor, kFeedSpinCeiling};
  int64_t delivered_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t gathered_ ABSL_GUARDED_BY(mu_) = 0;  // Steps gathered so far.
  std::vector<std::atomic<int64_t>> pushed_;   // Per replica; fixed at Start.
  // num_replicas_ once queues_ is built (release): lets Push skip mu_.
  std::atomic<int> started_replicas_{0};
  std::vector<std::unique_ptr<BoundedQueue<std::vector<Tensor>>>> queues_;
};

}  // namespace ipuflow::feeds::internal

#endif  // IPUFLOW_FEEDS_OUTFEED_CHANNEL_H_
