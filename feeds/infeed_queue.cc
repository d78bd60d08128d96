#include "feeds/infeed_queue.h"

#include <atomic>
#include <chrono>
#include <deque>
#include <thread>

#include "absl/strings/str_cat.h"
#include "core/checkpoint/checkpointed_input.h"
#include "core/ipu/bounded_queue.h"
#include "core/ipu/ipu_device.h"
#include "core/ipu/spin_wait.h"
#include "core/kernel.h"
#include "core/lifetime_gate.h"
#include "core/mutex.h"
#include "core/op_registry.h"
#include "feeds/data_loader.h"
#include "feeds/feed_channel.h"
#include "feeds/infeed_position.h"

namespace ipuflow::feeds {
namespace internal {

// Bounds of the rings' adaptive spin (as the outfeed's, outfeed_queue.cc).
constexpr std::chrono::nanoseconds kInfeedSpinFloor =
    std::chrono::microseconds(5);
constexpr std::chrono::nanoseconds kInfeedSpinCeiling =
    std::chrono::microseconds(20);

// The device side of an infeed: one bounded queue per replica, filled
// round-robin by a host thread. Shared: the IPUInfeedQueue owns it, the
// graph refers to it weakly, and a kernel inside Dequeue holds it.
//
// The hand-over is batched on the device side: a replica whose local cache
// is empty takes every element its ring holds under one lock
// (BoundedQueue::PopBatch) and serves the next Dequeues from that cache
// without touching the ring; once the cache is down to half the depth it
// takes what the ring holds without waiting (TryPopBatch), so a host
// thread blocked on a full ring resumes while the device still has work
// (it then answers within the host's spin, without a futex wake-up). Each
// side touches the other's cache lines (the lock, the slots) about twice
// per prefetch_depth elements, not once per element. The cost: the host
// may run up to 2 x prefetch_depth elements ahead of the device (a full
// ring and a full cache).
class InfeedChannel : public HostResource,
                      public ElementSource,
                      public checkpoint::CheckpointedInput {
 public:
  InfeedChannel(std::string id, std::string name, DatasetPtr dataset,
                int prefetch_depth)
      : id_(std::move(id)),
        name_(std::move(name)),
        dataset_(std::move(dataset)),
        loader_(DataLoader::Behind(*dataset_)),
        prefetch_depth_(prefetch_depth) {}
  ~InfeedChannel() override { Shutdown("destroyed"); }

  std::string DebugString() const override {
    return absl::StrCat("IPUInfeedQueue '", id_, "'");
  }
  absl::Status Prepare(int num_replicas, bool) override {
    return Start(num_replicas);
  }
  const ElementSpec& spec() const { return dataset_->spec(); }

  absl::Status Start(int num_replicas);
  absl::StatusOr<Element> Dequeue(int replica, int num_replicas,
                                  CancellationManager* cancellation);
  absl::Status GiveBack(int replica, int num_replicas,
                        std::vector<Element> elements);
  // A device loop's iteration that did not complete (TakenElements).
  absl::Status ReturnElement(int replica, int num_replicas,
                             std::vector<Tensor> element) override {
    std::vector<Element> elements;
    elements.push_back(std::move(element));
    return GiveBack(replica, num_replicas, std::move(elements));
  }
  // Wakes every device thread with Cancelled and joins the host thread;
  // later Starts fail.
  void Shutdown(const char* why);
  int64_t produced() const { return produced_.load(std::memory_order_relaxed); }
  std::vector<int64_t> consumed() const {
    MutexLock l(&mu_);
    std::vector<int64_t> out(num_replicas_);
    for (int r = 0; r < num_replicas_; ++r) out[r] = caches_[r].consumed;
    return out;
  }
  // Its part of a training checkpoint (infeed_position.h).
  const std::string& checkpoint_name() const override { return name_; }
  absl::Status SavePosition(int replicas,
                            checkpoint::Manifest* m) const override {
    std::vector<int64_t> base;
    {
      MutexLock l(&mu_);
      base = base_;
    }
    return SaveInfeedPosition(name_, base, consumed(), loader_.get(), replicas,
                              m);
  }
  absl::Status CheckPosition(const checkpoint::Manifest& m,
                             int replicas) const override {
    return CheckInfeedPosition(name_, consumed(), loader_.get(), m, replicas)
        .status();
  }
  void RestorePosition(const checkpoint::Manifest& m, int replicas) override {
    absl::StatusOr<int64_t> each =
        CheckInfeedPosition(name_, consumed(), loader_.get(), m, replicas);
    MutexLock l(&mu_);
    base_.assign(replicas, each.ok() ? *each : 0);
  }

  int waiting_dequeues() const {
    if (started_replicas_.load(std::memory_order_acquire) == 0) return 0;
    int n = 0;
    for (const auto& q : queues_) n += q->sleeping_consumers();
    return n;
  }

  // Callers inside the IPUInfeedQueue's methods: its destructor closes it
  // and waits for them to leave (Shutdown has woken them).
  LifetimeGate& callers() { return callers_; }

 private:
  using Slot = absl::StatusOr<Element>;
  // What one replica's device thread took from its ring and has not
  // delivered yet (items[next..]), and how many elements it delivered.
  // Touched only by that replica's Dequeue (one at a time, as
  // BoundedQueue's consumers of one replica always were) and by GiveBack
  // (which requires that no Dequeue for the replica runs); on a cache line
  // of its own, so replicas and the host thread do not share it.
  struct alignas(64) ReplicaCache {
    std::vector<Slot> items;  // Capacity kept across batches: no allocation.
    size_t next = 0;
    int64_t consumed = 0;
  };
  void HostLoop();

  const std::string id_;
  const std::string name_;
  const DatasetPtr dataset_;
  // The DataLoader behind dataset_ (DataLoader::Behind), or null.
  const std::shared_ptr<const DataLoader> loader_;
  const int prefetch_depth_;
  mutable Mutex mu_;
  // Elements each replica consumed before this queue existed (a restored
  // run's), added to what a checkpoint saves.
  std::vector<int64_t> base_ ABSL_GUARDED_BY(mu_);
  int num_replicas_ ABSL_GUARDED_BY(mu_) = 0;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  LifetimeGate callers_;
  // Read by every Dequeue, written rarely: on a line away from produced_,
  // which the host thread writes per element.
  // num_replicas_ once queues_ is built (release): lets Dequeue skip mu_.
  alignas(64) std::atomic<int> started_replicas_{0};
  // Elements given back (the count lets Dequeue skip mu_ while there are
  // none), and set once Shutdown has cancelled the rings (a cached element
  // is then not delivered, as a ring's would not be).
  std::atomic<int64_t> given_back_count_{0};
  std::atomic<bool> shut_down_hint_{false};
  std::vector<std::unique_ptr<BoundedQueue<Slot>>>
      queues_;                              // Fixed once started.
  std::unique_ptr<ReplicaCache[]> caches_;  // Fixed once started.
  // Elements given back, per replica, read before its cache and ring.
  std::vector<std::deque<Element>> given_back_ ABSL_GUARDED_BY(mu_);
  std::thread host_thread_;
  alignas(64) std::atomic<int64_t> produced_{0};
};

absl::Status InfeedChannel::Start(int num_replicas) {
  MutexLock l(&mu_);
  if (shut_down_) {
    return absl::CancelledError(
        absl::StrCat("IPUInfeedQueue '", id_, "' was destroyed"));
  }
  if (num_replicas_ == num_replicas) return absl::OkStatus();
  if (num_replicas_ != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "IPUInfeedQueue '", id_, "' feeds ", num_replicas_,
        " replicas; it cannot also feed a program with ", num_replicas));
  }
  if (num_replicas < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "IPUInfeedQueue '", id_, "': ", num_replicas, " replicas"));
  }
  for (int r = 0; r < num_replicas; ++r) {
    queues_.push_back(std::make_unique<BoundedQueue<Slot>>(
        prefetch_depth_, absl::StrCat("infeed '", id_, "' replica ", r)));
    // The device's Pop and the host thread's Push spin about as long as
    // the other side recently took to answer (BoundedQueue).
    queues_.back()->set_adaptive_spin(kInfeedSpinFloor, kInfeedSpinCeiling);
  }
  caches_ = std::make_unique<ReplicaCache[]>(num_replicas);
  given_back_.resize(num_replicas);
  num_replicas_ = num_replicas;
  host_thread_ = std::thread([this] { HostLoop(); });
  started_replicas_.store(num_replicas, std::memory_order_release);
  return absl::OkStatus();
}

void InfeedChannel::Shutdown(const char* why) {
  std::thread host;
  {
    MutexLock l(&mu_);
    if (shut_down_) return;
    shut_down_ = true;
    host = std::move(host_thread_);
  }
  // queues_ is fixed: Start can no longer run.
  for (auto& q : queues_) {
    q->Cancel(absl::CancelledError(
        absl::StrCat("IPUInfeedQueue '", id_, "' was ", why)));
  }
  // After the rings are cancelled: a Dequeue that sees it gets the ring's
  // reason instead of a cached element.
  shut_down_hint_.store(true, std::memory_order_release);
  if (host.joinable()) host.join();
}

void InfeedChannel::HostLoop() {
  std::unique_ptr<Iterator> it = dataset_->MakeIterator();
  const int replicas = static_cast<int>(queues_.size());
  for (int64_t i = 0;; ++i) {
    absl::StatusOr<Element> element = it->GetNext();
    if (absl::IsOutOfRange(element.status())) break;
    produced_.fetch_add(1, std::memory_order_relaxed);
    if (!queues_[i % replicas]->Push(std::move(element)).ok())
      return;  // Cancelled.
  }
  for (auto& q : queues_) q->Close();
}

absl::StatusOr<Element> InfeedChannel::Dequeue(
    int replica, int num_replicas, CancellationManager* cancellation) {
  // Per element: check without mu_ once started (Start rechecks under it).
  if (started_replicas_.load(std::memory_order_acquire) != num_replicas) {
    RETURN_IF_ERROR(Start(num_replicas));
  }
  if (replica < 0 || replica >= num_replicas) {
    return absl::InvalidArgumentError(absl::StrCat(
        "IPUInfeedQueue '", id_, "': replica ", replica, " of ", num_replicas));
  }
  ReplicaCache& cache = caches_[replica];
  if (given_back_count_.load(std::memory_order_acquire) > 0) {
    MutexLock l(&mu_);
    if (!given_back_[replica].empty()) {
      Element e = std::move(given_back_[replica].front());
      given_back_[replica].pop_front();
      given_back_count_.fetch_sub(1, std::memory_order_release);
      ++cache.consumed;
      return e;
    }
  }
  BoundedQueue<Slot>& ring = *queues_[replica];
  // A cancelled run or a destroyed queue takes no element: the ring's Pop
  // returns its status at once (a cancelled manager's reason, or the
  // ring's Cancel reason), as it did before the cache.
  if (shut_down_hint_.load(std::memory_order_acquire) ||
      (cancellation != nullptr && cancellation->cancelled())) {
    absl::StatusOr<Slot> slot = ring.Pop(cancellation);
    if (!slot.ok()) return slot.status();
    // Not reached (the ring is cancelled, or `cancellation` is, and both
    // stay so); were it, the element is newer than the cache's: after them.
    cache.items.push_back(*std::move(slot));
  }
  const size_t depth = ring.capacity();
  const size_t cached = cache.items.size() - cache.next;
  if (cached > 0 && cached == (depth + 1) / 2 && cached < depth) {
    // Refill ahead: drop the delivered prefix (moves `cached` elements),
    // then take what is ready, keeping the cache within the depth. An
    // empty or ended ring is seen by the PopBatch below, in its turn.
    cache.items.erase(cache.items.begin(),
                      cache.items.begin() + static_cast<ptrdiff_t>(cache.next));
    cache.next = 0;
    ring.TryPopBatch(&cache.items, depth - cached).IgnoreError();
  } else if (cached == 0) {
    cache.items.clear();
    cache.next = 0;
    absl::Status s = ring.PopBatch(&cache.items, depth, cancellation);
    if (absl::IsOutOfRange(s)) {
      return absl::OutOfRangeError(
          absl::StrCat("IPUInfeedQueue '", id_, "': the dataset ended after ",
                       produced_.load(), " element(s); replica ", replica,
                       " asked for another (its element ", cache.consumed + 1,
                       "). Repeat() the dataset or run fewer iterations."));
    }
    RETURN_IF_ERROR(s);
  }
  ++cache.consumed;
  return std::move(cache.items[cache.next++]);
}

absl::Status InfeedChannel::GiveBack(int replica, int num_replicas,
                                     std::vector<Element> elements) {
  MutexLock l(&mu_);
  if (shut_down_) {
    return absl::CancelledError(
        absl::StrCat("IPUInfeedQueue '", id_, "' was destroyed"));
  }
  if (num_replicas != num_replicas_ || replica < 0 || replica >= num_replicas ||
      static_cast<int64_t>(elements.size()) > caches_[replica].consumed) {
    return absl::InvalidArgumentError(absl::StrCat(
        "IPUInfeedQueue '", id_, "': cannot give back ", elements.size(),
        " element(s) to replica ", replica, " of ", num_replicas, " (it feeds ",
        num_replicas_, " replica(s))"));
  }
  // An element that does not match the spec would fail the dequeue later
  // with less to go on; say here which element, what it is and what the
  // spec wants (dtypes and shapes).
  for (size_t i = 0; i < elements.size(); ++i) {
    RETURN_IF_ERROR(
        spec().Check(elements[i],
                     absl::StrCat("IPUInfeedQueue '", id_,
                                  "': GiveBack to replica ", replica),
                     static_cast<int64_t>(i)));
  }
  std::deque<Element>& q = given_back_[replica];
  q.insert(q.begin(), std::make_move_iterator(elements.begin()),
           std::make_move_iterator(elements.end()));
  caches_[replica].consumed -= static_cast<int64_t>(elements.size());
  given_back_count_.fetch_add(static_cast<int64_t>(elements.size()),
                              std::memory_order_release);
  return absl::OkStatus();
}

}  // namespace internal

namespace {
std::atomic<int> next_infeed_id{0};
}  // namespace

absl::StatusOr<std::unique_ptr<IPUInfeedQueue>> IPUInfeedQueue::Create(
    DatasetPtr dataset, int prefetch_depth) {
  InfeedOptions options;
  options.prefetch_depth = prefetch_depth;
  return Create(std::move(dataset), options);
}

absl::StatusOr<std::unique_ptr<IPUInfeedQueue>> IPUInfeedQueue::Create(
    DatasetPtr dataset, const InfeedOptions& options) {
  if (dataset == nullptr)
    return absl::InvalidArgumentError("IPUInfeedQueue: null dataset");
  RETURN_IF_ERROR(dataset->status());
  if (options.name.empty()) {
    return absl::InvalidArgumentError(
        "IPUInfeedQueue: options.name is empty (checkpoints save the queue's "
        "position under it)");
  }
  const int prefetch_depth = options.prefetch_depth;
  if (prefetch_depth < 1 || prefetch_depth > 255) {
    return absl::InvalidArgumentError(absl::StrCat(
        "IPUInfeedQueue: prefetch_depth must be in [1, 255], got ",
        prefetch_depth, " (the default is ", kDefaultPrefetchDepth, ")"));
  }
  const ElementSpec& spec = dataset->spec();
  if (!spec.known()) {
    return absl::InvalidArgumentError(
        "IPUInfeedQueue: the dataset's element spec is unknown; give Map an "
        "output_spec");
  }
  for (int i = 0; i < spec.size(); ++i) {
    if (!spec.shapes[i].IsFullyDefined()) {
      return absl::InvalidArgumentError(
          absl::StrCat("IPUInfeedQueue: output shape ",
                       spec.shapes[i].DebugString(), " of component ", i,
                       " is not fully defined. If using "
                       "Dataset::Batch, set drop_remainder = true."));
    }
    if (spec.shapes[i].num_elements() == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "IPUInfeedQueue: component ", i, " has shape ",
          spec.shapes[i].DebugString(), " with a dimension of size 0"));
    }
  }
  return std::unique_ptr<IPUInfeedQueue>(
      new IPUInfeedQueue(std::move(dataset), options));
}

IPUInfeedQueue::IPUInfeedQueue(DatasetPtr dataset, const InfeedOptions& options)
    : id_(absl::StrCat("infeed_", next_infeed_id.fetch_add(1))),
      channel_(std::make_shared<internal::InfeedChannel>(
          id_, options.name, std::move(dataset), options.prefetch_depth)) {}

const std::string& IPUInfeedQueue::name() const {
  return channel_->checkpoint_name();
}

// Wakes every caller (Cancelled), then waits for them to leave: a pipeline
// feeder blocked in Dequeue returns on live memory. Device loops hold the
// channel through their graph and need no waiting.
IPUInfeedQueue::~IPUInfeedQueue() {
  channel_->Shutdown("destroyed");
  channel_->callers().CloseAndWait(absl::CancelledError(
      absl::StrCat("IPUInfeedQueue '", id_, "' was destroyed")));
}

const ElementSpec& IPUInfeedQueue::spec() const { return channel_->spec(); }

absl::StatusOr<std::vector<Output>> IPUInfeedQueue::BuildDequeue(
    const Scope& scope) {
  const ElementSpec& s = spec();
  Node* n = scope.AddNode(
      "InfeedDequeue", {},
      {{"feed_id", id_}, {"dtypes", s.dtypes}, {"shapes", s.shapes}},
      "InfeedDequeue");
  RETURN_IF_ERROR(scope.status());
  scope.graph()->AddHostResource(id_, channel_, n);
  dequeued_ = true;
  std::vector<Output> out;
  for (int i = 0; i < n->num_outputs(); ++i) out.push_back(Output(n, i));
  return out;
}

absl::Status IPUInfeedQueue::Start(int num_replicas) {
  return internal::ChannelCall(channel_)->Start(num_replicas);
}

absl::StatusOr<Element> IPUInfeedQueue::Dequeue(
    int replica, int num_replicas, CancellationManager* cancellation) {
  return internal::ChannelCall(channel_)->Dequeue(replica, num_replicas,
                                                  cancellation);
}

absl::Status IPUInfeedQueue::GiveBack(int replica, int num_replicas,
                                      std::vector<Element> elements) {
  return internal::ChannelCall(channel_)->GiveBack(replica, num_replicas,
                                                   std::move(elements));
}

int64_t IPUInfeedQueue::elements_produced() const {
  return channel_->produced();
}

std::vector<int64_t> IPUInfeedQueue::ConsumedPerReplica() const {
  return channel_->consumed();
}

int IPUInfeedQueue::waiting_dequeues() const {
  return channel_->waiting_dequeues();
}

namespace {

REGISTER_OP("InfeedDequeue")
    .RequiredAttr("feed_id", AttrType::kString)
    .RequiredAttr("dtypes", AttrType::kDTypeList)
    .RequiredAttr("shapes", AttrType::kShapeList)
    .SetStateful()
    .SetReplicaIdentity(ReplicaIdentity::kDiffers)  // Element i: replica i % R.
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      ASSIGN_OR_RETURN(auto dtypes, c.attr<std::vector<DType>>("dtypes"));
      ASSIGN_OR_RETURN(auto shapes, c.attr<std::vector<TensorShape>>("shapes"));
      if (dtypes.size() != shapes.size() || dtypes.empty()) {
        return absl::InvalidArgumentError("dtypes and shapes must match");
      }
      for (size_t i = 0; i < dtypes.size(); ++i)
        c.set_output(i, dtypes[i], shapes[i]);
      return absl::OkStatus();
    })
    .SetKernel([](KernelContext& ctx) -> absl::Status {
      // Held for the whole dequeue (feed_channel.h).
      ASSIGN_OR_RETURN(std::shared_ptr<internal::InfeedChannel> queue,
                       internal::FeedChannel<internal::InfeedChannel>(
                           ctx, "infeed", "IPUInfeedQueue"));
      absl::StatusOr<Element> element = queue->Dequeue(
          ctx.env().replica, ctx.env().num_replicas, ctx.env().cancellation);
      RETURN_IF_ERROR(element.status());
      if (static_cast<int>(element->size()) != ctx.num_outputs()) {
        return ctx.InvalidArgument("infeed element has ", element->size(),
                                   " components, expected ", ctx.num_outputs());
      }
      for (int i = 0; i < ctx.num_outputs(); ++i) {
        const Tensor& t = (*element)[i];
        if (t.dtype() != ctx.output_dtype(i) ||
            t.shape() != ctx.planned_shape(i)) {
          return ctx.InvalidArgument("infeed element component ", i, " is ",
                                     DTypeName(t.dtype()),
                                     t.shape().DebugString(), ", expected ",
                                     DTypeName(ctx.output_dtype(i)),
                                     ctx.planned_shape(i).DebugString());
        }
      }
      if (TakenElements* taken = ctx.env().taken) {
        // Given back if this loop iteration does not complete (the tensors
        // share their buffers: no copy).
        taken->Record(queue, ctx.env().replica, ctx.env().num_replicas,
                      *element);
      }
      int64_t bytes = 0;
      for (size_t i = 0; i < element->size(); ++i) {
        bytes += (*element)[i].TotalBytes();
        ctx.set_output(static_cast<int>(i), std::move((*element)[i]));
      }
      if (ctx.env().device != nullptr) {
        ctx.env().device->counters().host_to_device.fetch_add(
            bytes, std::memory_order_relaxed);
      }
      return absl::OkStatus();
    })
    .NotDifferentiable("data from the host has no inputs");

}  // namespace
}  // namespace ipuflow::feeds
