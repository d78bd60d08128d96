// IPUInfeedQueue: streams a dataset to the device. A host thread pulls
// elements from the dataset and pushes them, round-robin, into one bounded
// ring buffer per replica (capacity = prefetch_depth); an InfeedDequeue node
// inside a device loop pops one element per replica per iteration.
//
//   ASSIGN_OR_RETURN(auto infeed, IPUInfeedQueue::Create(dataset));
//   ASSIGN_OR_RETURN(loops::Loop loop,
//                    loops::Repeat(scope, 100, body, {}, infeed.get()));
//
// Element i of the dataset goes to replica i % R; no element is skipped or
// delivered twice. When the dataset ends, a device that asks for another
// element gets OutOfRange naming the queue and the count (the original
// aborts the process instead). A dataset error reaches the device in place
// of its element. The stream continues across runs of the program.
//
// Thread safety: BuildDequeue is called while building (one thread); the
// device side (Dequeue) is called by each replica's thread; the destructor
// stops the host thread and wakes any device thread blocked on the queue
// with Cancelled.
#ifndef IPUFLOW_FEEDS_INFEED_QUEUE_H_
#define IPUFLOW_FEEDS_INFEED_QUEUE_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "core/cancellation.h"
#include "core/mutex.h"
#include "feeds/dataset.h"
#include "feeds/ring_buffer.h"
#include "ops/control/loops.h"

namespace ipuflow::feeds {

inline constexpr int kDefaultPrefetchDepth = 3;

class IPUInfeedQueue : public loops::InfeedSource {
 public:
  // InvalidArgument unless every element shape is fully defined and
  // 1 <= prefetch_depth <= 255.
  static absl::StatusOr<std::unique_ptr<IPUInfeedQueue>> Create(
      DatasetPtr dataset, int prefetch_depth = kDefaultPrefetchDepth);
  ~IPUInfeedQueue() override;

  const std::string& id() const { return id_; }
  const ElementSpec& spec() const { return dataset_->spec(); }
  // Adds an InfeedDequeue node (one output per element component).
  absl::StatusOr<std::vector<Output>> BuildDequeue(const Scope& scope) override;
  bool dequeued() const { return dequeued_; }

  // Device side: the next element for `replica` of `num_replicas`. Blocks
  // until the host thread has it; `cancellation` (may be null) wakes it.
  absl::StatusOr<Element> Dequeue(int replica, int num_replicas,
                                  CancellationManager* cancellation);
  // Elements the host thread has taken from the dataset so far.
  int64_t elements_produced() const;

  // The live queue called `id`, for the InfeedDequeue kernel.
  static IPUInfeedQueue* Find(const std::string& id);

 private:
  using Slot = absl::StatusOr<Element>;
  IPUInfeedQueue(DatasetPtr dataset, int prefetch_depth);
  absl::Status Start(int num_replicas);
  void HostLoop();

  const DatasetPtr dataset_;
  const int prefetch_depth_;
  const std::string id_;
  bool dequeued_ = false;
  Mutex mu_;
  int num_replicas_ ABSL_GUARDED_BY(mu_) = 0;
  // num_replicas_ once rings_ is built (release): lets Dequeue skip mu_.
  std::atomic<int> started_replicas_{0};
  std::vector<std::unique_ptr<RingBuffer<Slot>>> rings_;  // Fixed once started.
  std::atomic<int64_t> produced_{0};
  std::vector<int64_t> consumed_;  // Per replica; each touched by its replica.
  std::thread host_thread_;
};

}  // namespace ipuflow::feeds

#endif  // IPUFLOW_FEEDS_INFEED_QUEUE_H_
