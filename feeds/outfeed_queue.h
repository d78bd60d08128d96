// IPUOutfeedQueue: streams results from the device to the host. An
// OutfeedEnqueue node (built by Enqueue) copies one element per replica per
// iteration into that replica's bounded ring buffer (capacity buffer_depth:
// when it is full the device waits, so nothing is dropped); once every
// replica has pushed its element of a step, the thread that completed it
// (the last replica to push, or a reader that made room) moves the step to
// the host-side list, which Dequeue, iteration and Next read. No thread of
// its own: a step reaches Next with one hand-over.
//
//   ASSIGN_OR_RETURN(auto outfeed, IPUOutfeedQueue::Create());
//   auto body = [&](const Scope& s, const std::vector<Output>&) {
//     outfeed->Enqueue(s, {{"loss", ops::ReduceMean(s, x)}});  // each step
//     return std::vector<Output>{};
//   };
//   ASSIGN_OR_RETURN(loops::Loop loop, loops::Repeat(scope, 4, body));
//   RETURN_IF_ERROR(strategy.Run(*scope.graph(), {}, {loop.op}).status());
//   absl::StatusOr<OutfeedElement> first = outfeed->Next();  // blocks
//   ASSIGN_OR_RETURN(OutfeedResult rest, outfeed->Dequeue());  // 3 steps
//   rest["loss"].shape();  // [3], or [3, replicas] with replication
//
// Next waits for one step; Dequeue takes every step there is, stacked;
// `for (const OutfeedElement& step : *outfeed)` iterates over them.
//
// Modes: kAll keeps every step until it is dequeued; kLast keeps only the
// latest. Dequeue before anything was enqueued: kAll returns empty tensors
// (leading dimension 0), kLast is FailedPrecondition.
//
// Output modes (feeds/output_mode.h) choose, on the device side, which
// device iterations of a run are sent at all.
//
// Bounded: the host-side list holds at most `max_host_bytes` of steps (at
// least one step). When it is full steps stay in the rings, the rings fill
// and the device waits (back-pressure): a slow monitor costs time, never
// unbounded memory. A program that outfeeds more
// than that with nobody reading waits until someone reads (or its run is
// cancelled).
//
// A run that stops with an error (a kernel error, a cancel, the IPU system
// reset or destroyed) ends that run, not the queue: Next() returns the steps
// the run completed, then the run's error once (its code, "the run feeding
// IPUOutfeedQueue '...' stopped: <why>"), then the next run's steps.
// When no executable can push any more (the last one that enqueues was
// destroyed, or its IPU system was destroyed, reconfigured or cancelled),
// Next returns the steps still held, then Cancelled ("IPUOutfeedQueue '...':
// no executable can feed it any more: <why>"), until an executable that
// enqueues is compiled again: a monitor thread always ends.
//
// The queue reaches a device program only through its graph: Enqueue
// registers it as a host resource of the graph (Graph::AddHostResource),
// and the OutfeedEnqueue kernel finds it there; compiling a device program
// that enqueues sizes the rings (Prepare). A run after the
// queue was destroyed fails with FailedPrecondition naming it and the node.
//
// Thread safety: the host-side methods (Dequeue, Next, iteration, Close) may
// be called from any thread, concurrently with running programs: every step
// is delivered exactly once, in order, to whichever caller takes it.
//
// Lifetime: destroying the queue wakes every caller (Next/Dequeue with
// Cancelled "... was destroyed", a device blocked on a full ring with
// Cancelled) and waits for callers inside its methods to leave. Programs
// and pipelines built with it (their OutfeedEnqueue node) then fail with
// FailedPrecondition.
#ifndef IPUFLOW_FEEDS_OUTFEED_QUEUE_H_
#define IPUFLOW_FEEDS_OUTFEED_QUEUE_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/cancellation.h"
#include "core/scope.h"
#include "feeds/outfeed_result.h"
#include "feeds/output_mode.h"

namespace ipuflow {
class IPUDevice;
}  // namespace ipuflow

namespace ipuflow::feeds {

namespace internal {
class OutfeedChannel;
}  // namespace internal

inline constexpr int kDefaultOutfeedBufferDepth = 3;
// Host-side list bound: 1 GiB of steps.
inline constexpr int64_t kDefaultOutfeedHostBytes = int64_t{1} << 30;

// Bounds of the options: an EveryN period (device iterations), the ring
// slots per replica.
inline constexpr int64_t kMaxOutputPeriod = int64_t{1} << 40;
inline constexpr int kMaxOutfeedBufferDepth = 1 << 16;

// Every option of an outfeed for its whole range (core/option_checks.h):
// output_mode.kind an OutputMode::Kind, its period in [1,
// kMaxOutputPeriod] for EveryN and 1 otherwise, mode an OutfeedMode,
// buffer_depth in [1, kMaxOutfeedBufferDepth], max_host_bytes in [1, this
// machine's memory]. InvalidArgument "IPUOutfeedQueue: <field> is
// <value>; ..." naming every field at fault (EveryN(n < 1): the
// original's text).
absl::Status CheckOutfeedOptions(OutputMode output_mode, OutfeedMode mode,
                                 int buffer_depth, int64_t max_host_bytes);

class IPUOutfeedQueue {
 public:
  // InvalidArgument unless CheckOutfeedOptions accepts the options.
  static absl::StatusOr<std::unique_ptr<IPUOutfeedQueue>> Create(
      OutfeedMode mode = OutfeedMode::kAll,
      int buffer_depth = kDefaultOutfeedBufferDepth,
      int64_t max_host_bytes = kDefaultOutfeedHostBytes);
  // With an output mode.
  static absl::StatusOr<std::unique_ptr<IPUOutfeedQueue>> Create(
      OutputMode output_mode, OutfeedMode mode = OutfeedMode::kAll,
      int buffer_depth = kDefaultOutfeedBufferDepth,
      int64_t max_host_bytes = kDefaultOutfeedHostBytes);
  ~IPUOutfeedQueue();

  const std::string& id() const { return id_; }
  OutfeedMode mode() const;
  // As created (Default unresolved).
  OutputMode output_mode() const;

  // Device side. Only one enqueue per queue: a second is an error recorded
  // in the scope (as in the original).
  Node* Enqueue(const Scope& scope, const std::vector<Output>& values);
  Node* Enqueue(const Scope& scope,
                const std::vector<std::pair<std::string, Output>>& values,
                OutfeedIteration iteration = {});
  // Called by the OutfeedEnqueue kernel on replica `replica`'s thread.
  // `iteration`: the device iteration of the run the values
  // belong to (-1: one more than the last push's, as in a device loop);
  // the output mode decides whether they are sent now, held for the run's
  // end, or not sent. InvalidArgument naming the queue if `values` differ
  // from what Enqueue declared (count, dtypes, shapes); FailedPrecondition
  // after Close or before any Enqueue; Cancelled if the queue is destroyed
  // meanwhile. What is sent counts as `device`'s device-to-host bytes (if
  // given), when it is sent.
  absl::Status Push(int replica, int num_replicas, std::vector<Tensor> values,
                    CancellationManager* cancellation, int64_t iteration = -1,
                    IPUDevice* device = nullptr);
  // Tells the queue that a run feeding it ended well: Final and Sum send
  // what they held; EveryN checks that its period divided the run's device
  // iterations (InvalidArgument with the original's text otherwise).
  absl::Status RunFinished();
  // Tells the queue that the run feeding it ended with `status` (not OK):
  // executables call it (through HostResource::RunStopped); Next delivers
  // it after the steps the run completed.
  void RunStopped(const absl::Status& status);
  // Makes the rings for `num_replicas` (a no-op once started
  // with that count; FailedPrecondition for another). Compiling a device
  // program that enqueues calls it (`training` resolves Default); Push
  // calls it if nobody did.
  absl::Status Start(int num_replicas, bool training = false);

  // Host side. kAll: every step so far (up to the host-side bound), stacked:
  // [steps, (replicas,) ...]; removes them. InvalidArgument naming the
  // output and two shapes if the steps' shapes differ (an unknown batch
  // dimension): the steps stay, read them one at a time with Next or
  // TakeAvailable. kLast: the latest step.
  absl::StatusOr<OutfeedResult> Dequeue();
  // Waits for the next step (kAll). OutOfRange once closed and drained;
  // Cancelled if the queue is destroyed while waiting, or once no
  // executable can feed it; a stopped run's status (see above).
  absl::StatusOr<OutfeedElement> Next();
  // Steps available now, removed from the queue (kAll).
  std::vector<OutfeedElement> TakeAvailable();
  // No more enqueues will come: Next returns every step pushed before the
  // Close, then OutOfRange; a later Push is FailedPrecondition.
  void Close();
  int64_t steps_delivered() const;
  // Bytes of steps held on the host now, and the most ever held.
  int64_t host_bytes() const;
  int64_t peak_host_bytes() const;
  // Threads in Next, and device-side pushes asleep on a full ring, now
  // (tests use them to know a thread is blocked instead of sleeping).
  int waiting_readers() const;
  int waiting_pushes() const;

  // `for (const OutfeedElement& step : *outfeed)` takes the steps available
  // when the loop starts (like the original's iterator). One iterating
  // thread at a time; other threads use Next or TakeAvailable.
  std::vector<OutfeedElement>::const_iterator begin();
  std::vector<OutfeedElement>::const_iterator end();

 private:
  IPUOutfeedQueue(OutputMode output_mode, OutfeedMode mode, int buffer_depth,
                  int64_t max_host_bytes);

  const std::string id_;
  // What the device side uses; the graph holds a weak reference to it, and
  // a kernel inside Push keeps it alive past the queue's destruction.
  std::shared_ptr<internal::OutfeedChannel> channel_;
  std::vector<OutfeedElement> iterated_;  // Backs begin()/end().
};

}  // namespace ipuflow::feeds

#endif  // IPUFLOW_FEEDS_OUTFEED_QUEUE_H_
