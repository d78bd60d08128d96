// IPUInfeedQueue: streams a dataset to the device. A host thread pulls
// elements from the dataset and pushes them, round-robin, into one bounded
// queue per replica (core/ipu/bounded_queue.h, capacity = prefetch_depth);
// an InfeedDequeue node inside a device loop pops one element per replica
// per iteration.
//
//   ASSIGN_OR_RETURN(auto infeed, IPUInfeedQueue::Create(dataset));
//   ASSIGN_OR_RETURN(loops::Loop loop,
//                    loops::Repeat(scope, 100, body, {}, infeed.get()));
//
// Element i of the dataset goes to replica i % R; no element is skipped or
// delivered twice. The device side takes the elements its ring holds in
// batches (one lock per batch, not per element), so the host thread may be
// up to 2 x prefetch_depth elements ahead of a replica. When the dataset
// ends, a device that asks for another element gets OutOfRange naming the
// queue and the count (the original aborts the process instead). A dataset
// error reaches the device in place of its element. The stream continues across
// runs of the program.
//
// The queue reaches a device program only through its graph: BuildDequeue
// registers it as a host resource of the graph (Graph::AddHostResource),
// and the InfeedDequeue kernel finds it there. Compiling a device program
// that uses it starts the host thread with the replica count (Prepare);
// a run after the queue was destroyed fails with FailedPrecondition naming
// the queue and the node.
//
// A training checkpoint (core/checkpoint/training_state.h) finds the queue
// through the device program that dequeues from it and saves its position
// under its name (InfeedOptions::name): per replica the elements the device
// consumed and, when a DataLoader's ToInfeedDataset() is its dataset (or
// under Map, Prefetch, Repeat or Take), where that loader stands. Resume
// with feeds/resume_input.h.
//
// Thread safety: BuildDequeue is called while building (one thread); the
// device side (Dequeue) is called by each replica's thread.
//
// Lifetime: the destructor wakes every device thread blocked on the queue
// with Cancelled ("IPUInfeedQueue '...' was destroyed"), waits for callers
// inside Dequeue/Start to leave, and joins the host thread (so a dataset
// blocked inside GetNext delays it). Device loops and pipelines reach the
// queue through their graph (its InfeedDequeue node) and keep what they use
// alive: a run after the queue is gone fails with FailedPrecondition. A stop
// (cancel, reset, kernel error) ends the run, not the stream: a device that
// was waiting took no element, the elements a stopped device-loop iteration
// or pipeline micro-batch took are given back (core/taken_elements.h), and
// the next run continues with the next one: nothing lost, nothing repeated.
#ifndef IPUFLOW_FEEDS_INFEED_QUEUE_H_
#define IPUFLOW_FEEDS_INFEED_QUEUE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/cancellation.h"
#include "feeds/dataset.h"
#include "ops/control/loops.h"

namespace ipuflow::feeds {

namespace internal {
class InfeedChannel;
}  // namespace internal

inline constexpr int kDefaultPrefetchDepth = 3;

struct InfeedOptions {
  // The name a checkpoint saves the queue's position under; unique among
  // the infeeds of a program (TensorFlow's IPUInfeedQueue feed_name).
  std::string name = "infeed";
  // Elements each replica's ring holds: 1..255.
  int prefetch_depth = kDefaultPrefetchDepth;
};

class IPUInfeedQueue : public loops::InfeedSource {
 public:
  // InvalidArgument unless every element shape is fully defined, the name
  // is not empty and 1 <= prefetch_depth <= 255.
  static absl::StatusOr<std::unique_ptr<IPUInfeedQueue>> Create(
      DatasetPtr dataset, const InfeedOptions& options);
  static absl::StatusOr<std::unique_ptr<IPUInfeedQueue>> Create(
      DatasetPtr dataset, int prefetch_depth = kDefaultPrefetchDepth);
  ~IPUInfeedQueue() override;

  // Unique in the process: the graph's key for the queue.
  const std::string& id() const { return id_; }
  // InfeedOptions::name.
  const std::string& name() const;
  const ElementSpec& spec() const;
  // Adds an InfeedDequeue node (one output per element component).
  absl::StatusOr<std::vector<Output>> BuildDequeue(const Scope& scope) override;
  bool dequeued() const { return dequeued_; }

  // Device side: the next element for `replica` of `num_replicas`. Blocks
  // until the host thread has it; `cancellation` (may be null) ends the
  // wait with its reason (the queue keeps its elements; a cancelled
  // `cancellation` takes none). REQUIRES: calls for one replica do not
  // overlap (each replica's thread, or threads ordered by a join / lock).
  absl::StatusOr<Element> Dequeue(int replica, int num_replicas,
                                  CancellationManager* cancellation);
  // Device side: puts `elements` (taken by Dequeue for `replica`, in the
  // order taken) back at the front of its stream, for a device program that
  // stopped before it processed them (a pipeline's feeder runs ahead of its
  // stages). REQUIRES: no Dequeue for `replica` is running.
  absl::Status GiveBack(int replica, int num_replicas,
                        std::vector<Element> elements);
  // Starts the host thread for `num_replicas` (a no-op once started with
  // that count; FailedPrecondition for another). Compiling a device program
  // that dequeues calls it; Dequeue calls it if nobody did.
  absl::Status Start(int num_replicas);
  // Elements the host thread has taken from the dataset so far.
  int64_t elements_produced() const;
  // Elements each replica's device side has consumed: taken and not given
  // back (a stopped iteration's elements are not counted), so between runs
  // this is exactly what the device used, whatever the host thread read
  // ahead. The input position a checkpoint saves
  // (core/checkpoint/training_state.h). Empty before Start. REQUIRES: no run
  // in progress.
  std::vector<int64_t> ConsumedPerReplica() const;
  // Device-side callers asleep in Dequeue now (tests use it to know a
  // thread is blocked before waking it, instead of sleeping).
  int waiting_dequeues() const;

 private:
  IPUInfeedQueue(DatasetPtr dataset, const InfeedOptions& options);

  const std::string id_;
  bool dequeued_ = false;
  // What the device side uses; the graph holds a weak reference to it, and
  // a kernel inside Dequeue keeps it alive past the queue's destruction.
  std::shared_ptr<internal::InfeedChannel> channel_;
};

}  // namespace ipuflow::feeds

#endif  // IPUFLOW_FEEDS_INFEED_QUEUE_H_
