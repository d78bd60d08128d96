#include "feeds/outfeed_queue.h"

#include <atomic>
#include <deque>
#include <thread>

#include "absl/strings/str_cat.h"
#include "core/ipu/bounded_queue.h"
#include "core/ipu/ipu_device.h"
#include "core/kernel.h"
#include "core/mutex.h"
#include "core/op_registry.h"

namespace ipuflow::feeds {
namespace {

std::atomic<int> next_id{0};

// `parts` stacked along a new leading dimension; an empty list gives a
// tensor with leading dimension 0 of `shape` (unknown dims as 0).
Tensor StackOrEmpty(const std::vector<Tensor>& parts, DType dtype,
                    TensorShape shape) {
  if (!parts.empty()) return *Stack(parts);
  for (int i = 0; i < shape.rank(); ++i) {
    if (shape.dim(i) < 0) shape.set_dim(i, 0);
  }
  shape.InsertDim(0, 0);
  return Tensor(dtype, shape);
}

}  // namespace

const Tensor& OutfeedResult::operator[](const std::string& name) const {
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) return tensors[i];
  }
  IPU_CHECK(false && "no such outfeed name");
  return tensors[0];
}

namespace internal {

// Everything behind an IPUOutfeedQueue: one bounded queue per replica that
// the device pushes to, the gathering host thread, and the host-side list.
// Shared: the IPUOutfeedQueue owns it, the graph refers to it weakly, and a
// kernel inside Push holds it.
class OutfeedChannel : public HostResource {
 public:
  OutfeedChannel(std::string id, OutfeedMode mode, int buffer_depth)
      : mode_(mode), buffer_depth_(buffer_depth), id_(std::move(id)) {}
  ~OutfeedChannel() override { Shutdown(); }

  std::string DebugString() const override {
    return absl::StrCat("IPUOutfeedQueue '", id_, "'");
  }
  absl::Status Prepare(int num_replicas) override { return Start(num_replicas); }
  OutfeedMode mode() const { return mode_; }

  Node* Enqueue(const Scope& scope,
                const std::vector<std::pair<std::string, Output>>& values);
  absl::Status Start(int num_replicas);
  absl::Status Push(int replica, int num_replicas, std::vector<Tensor> values,
                    CancellationManager* cancellation);
  absl::StatusOr<OutfeedResult> Dequeue();
  absl::StatusOr<OutfeedElement> Next();
  std::vector<OutfeedElement> TakeAvailable();
  void Close();
  int64_t steps_delivered() const;
  // Wakes every thread waiting on the queue with Cancelled and joins the
  // gathering thread; later Starts fail.
  void Shutdown();

 private:
  void HostLoop();
  OutfeedElement MakeStep(std::vector<std::vector<Tensor>> per_replica) const;
  // Waits until the host thread has gathered every step whose elements all
  // replicas had pushed when this was called: what a program enqueued before
  // it returned is visible to the next host-side read.
  void CatchUp() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const OutfeedMode mode_;
  const int buffer_depth_;
  const std::string id_;
  std::vector<std::string> names_;
  std::vector<DType> dtypes_;
  std::vector<TensorShape> shapes_;
  bool enqueued_ = false;

  mutable Mutex mu_;
  CondVar cv_;
  int num_replicas_ ABSL_GUARDED_BY(mu_) = 0;
  std::deque<OutfeedElement> steps_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  bool destroyed_ ABSL_GUARDED_BY(mu_) = false;
  bool host_stopped_ ABSL_GUARDED_BY(mu_) = false;  // Gathering thread ended.
  int64_t delivered_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t gathered_ ABSL_GUARDED_BY(mu_) = 0;  // Steps the host thread made.
  std::vector<std::atomic<int64_t>> pushed_;    // Per replica; fixed at Start.
  // num_replicas_ once queues_ is built (release): lets Push skip mu_.
  std::atomic<int> started_replicas_{0};
  std::vector<std::unique_ptr<BoundedQueue<std::vector<Tensor>>>> queues_;
  std::thread host_thread_;
};

Node* OutfeedChannel::Enqueue(
    const Scope& scope,
    const std::vector<std::pair<std::string, Output>>& values) {
  if (enqueued_) {
    scope.UpdateStatus(absl::FailedPreconditionError(absl::StrCat(
        "IPUOutfeedQueue '", id_, "': an outfeed can only be enqueued once")));
    return nullptr;
  }
  std::vector<std::string> names;
  std::vector<Output> inputs;
  for (const auto& [name, out] : values) {
    names.push_back(name);
    inputs.push_back(out);
  }
  Node* n = scope.AddNode("OutfeedEnqueue", inputs,
                          {{"feed_id", id_}, {"names", names}},
                          "OutfeedEnqueue");
  if (n == nullptr) return nullptr;
  enqueued_ = true;
  names_ = names;
  for (const Output& o : inputs) {
    dtypes_.push_back(o.dtype());
    shapes_.push_back(o.shape());
  }
  return n;
}

absl::Status OutfeedChannel::Start(int num_replicas) {
  MutexLock l(&mu_);
  if (destroyed_) {
    return absl::CancelledError(
        absl::StrCat("IPUOutfeedQueue '", id_, "' was destroyed"));
  }
  if (num_replicas_ == num_replicas) return absl::OkStatus();
  if (num_replicas_ != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "IPUOutfeedQueue '", id_, "' receives from ", num_replicas_,
        " replicas; it cannot also serve a program with ", num_replicas));
  }
  for (int r = 0; r < num_replicas; ++r) {
    queues_.push_back(std::make_unique<BoundedQueue<std::vector<Tensor>>>(
        buffer_depth_, absl::StrCat("outfeed '", id_, "' replica ", r)));
  }
  pushed_ = std::vector<std::atomic<int64_t>>(num_replicas);
  num_replicas_ = num_replicas;
  host_thread_ = std::thread([this] { HostLoop(); });
  started_replicas_.store(num_replicas, std::memory_order_release);
  return absl::OkStatus();
}

absl::Status OutfeedChannel::Push(int replica, int num_replicas,
                                   std::vector<Tensor> values,
                                   CancellationManager* cancellation) {
  // Per element: check without mu_ once started (Start rechecks under it).
  if (started_replicas_.load(std::memory_order_acquire) != num_replicas) {
    RETURN_IF_ERROR(Start(num_replicas));
  }
  absl::Status s = queues_[replica]->Push(std::move(values), cancellation);
  if (s.ok()) pushed_[replica].fetch_add(1, std::memory_order_release);
  return s;
}

OutfeedElement OutfeedChannel::MakeStep(
    std::vector<std::vector<Tensor>> per_replica) const {
  OutfeedElement step;
  step.names = names_;
  for (size_t i = 0; i < names_.size(); ++i) {
    if (per_replica.size() == 1) {
      step.tensors.push_back(std::move(per_replica[0][i]));
    } else {
      std::vector<Tensor> parts;
      for (auto& r : per_replica) parts.push_back(std::move(r[i]));
      step.tensors.push_back(*Stack(parts));
    }
  }
  return step;
}

// Gathers one element from every replica, in replica order, per step.
void OutfeedChannel::HostLoop() {
  for (;;) {
    std::vector<std::vector<Tensor>> per_replica;
    for (auto& q : queues_) {
      absl::StatusOr<std::vector<Tensor>> v = q->Pop();
      if (!v.ok()) {
        // Cancelled (the queue was destroyed): readers must not wait for
        // steps this thread will never gather.
        MutexLock l(&mu_);
        host_stopped_ = true;
        cv_.SignalAll();
        return;
      }
      per_replica.push_back(*std::move(v));
    }
    OutfeedElement step = MakeStep(std::move(per_replica));
    MutexLock l(&mu_);
    if (mode_ == OutfeedMode::kLast) steps_.clear();
    steps_.push_back(std::move(step));
    ++gathered_;
    cv_.SignalAll();
  }
}

void OutfeedChannel::CatchUp() {
  if (num_replicas_ == 0) return;
  int64_t target = pushed_[0].load(std::memory_order_acquire);
  for (const auto& p : pushed_) {
    target = std::min(target, p.load(std::memory_order_acquire));
  }
  cv_.Await(&mu_, [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return gathered_ >= target || destroyed_ || host_stopped_;
  });
}

absl::StatusOr<OutfeedResult> OutfeedChannel::Dequeue() {
  MutexLock l(&mu_);
  CatchUp();
  if (mode_ == OutfeedMode::kLast) {
    if (steps_.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "IPUOutfeedQueue '", id_, "': trying to get the last value from an "
          "outfeed queue before anything was enqueued"));
    }
    OutfeedResult last = steps_.back();
    steps_.clear();
    ++delivered_;
    return last;
  }
  OutfeedResult result;
  result.names = names_;
  for (size_t i = 0; i < names_.size(); ++i) {
    std::vector<Tensor> parts;
    for (const OutfeedElement& step : steps_) parts.push_back(step.tensors[i]);
    TensorShape shape = shapes_[i];
    if (num_replicas_ > 1) shape.InsertDim(0, num_replicas_);
    result.tensors.push_back(StackOrEmpty(parts, dtypes_[i], shape));
  }
  delivered_ += static_cast<int64_t>(steps_.size());
  steps_.clear();
  return result;
}

absl::StatusOr<OutfeedElement> OutfeedChannel::Next() {
  MutexLock l(&mu_);
  cv_.Await(&mu_, [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return !steps_.empty() || closed_ || destroyed_ || host_stopped_;
  });
  // Closed: what was pushed before Close still comes out first.
  if (steps_.empty() && closed_ && !destroyed_) CatchUp();
  if (!steps_.empty()) {
    OutfeedElement step = std::move(steps_.front());
    steps_.pop_front();
    ++delivered_;
    return step;
  }
  if (destroyed_ || host_stopped_) {
    return absl::CancelledError(absl::StrCat(
        "IPUOutfeedQueue '", id_, "' was cancelled (destroyed or system reset)"));
  }
  return absl::OutOfRangeError(
      absl::StrCat("IPUOutfeedQueue '", id_, "' is closed and drained"));
}

std::vector<OutfeedElement> OutfeedChannel::TakeAvailable() {
  MutexLock l(&mu_);
  CatchUp();
  std::vector<OutfeedElement> out(std::make_move_iterator(steps_.begin()),
                                  std::make_move_iterator(steps_.end()));
  delivered_ += static_cast<int64_t>(steps_.size());
  steps_.clear();
  return out;
}

void OutfeedChannel::Close() {
  MutexLock l(&mu_);
  closed_ = true;
  cv_.SignalAll();
}

int64_t OutfeedChannel::steps_delivered() const {
  MutexLock l(&mu_);
  return delivered_;
}

void OutfeedChannel::Shutdown() {
  std::thread host;
  {
    MutexLock l(&mu_);
    if (destroyed_) return;
    destroyed_ = true;
    host = std::move(host_thread_);
    cv_.SignalAll();
  }
  // queues_ is fixed: Start can no longer run.
  for (auto& q : queues_) {
    q->Cancel(absl::CancelledError(
        absl::StrCat("IPUOutfeedQueue '", id_, "' was destroyed")));
  }
  if (host.joinable()) host.join();
}

}  // namespace internal

absl::StatusOr<std::unique_ptr<IPUOutfeedQueue>> IPUOutfeedQueue::Create(
    OutfeedMode mode, int buffer_depth) {
  if (buffer_depth < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "IPUOutfeedQueue: buffer_depth cannot be less than 1, got ",
        buffer_depth, " (the default is ", kDefaultOutfeedBufferDepth, ")"));
  }
  return std::unique_ptr<IPUOutfeedQueue>(new IPUOutfeedQueue(mode, buffer_depth));
}

IPUOutfeedQueue::IPUOutfeedQueue(OutfeedMode mode, int buffer_depth)
    : id_(absl::StrCat("outfeed_", next_id.fetch_add(1))),
      channel_(std::make_shared<internal::OutfeedChannel>(id_, mode,
                                                          buffer_depth)) {}

IPUOutfeedQueue::~IPUOutfeedQueue() { channel_->Shutdown(); }

OutfeedMode IPUOutfeedQueue::mode() const { return channel_->mode(); }

Node* IPUOutfeedQueue::Enqueue(const Scope& scope,
                               const std::vector<Output>& values) {
  std::vector<std::pair<std::string, Output>> named;
  for (size_t i = 0; i < values.size(); ++i) {
    named.push_back({absl::StrCat(i), values[i]});
  }
  return Enqueue(scope, named);
}

Node* IPUOutfeedQueue::Enqueue(
    const Scope& scope,
    const std::vector<std::pair<std::string, Output>>& values) {
  Node* n = channel_->Enqueue(scope, values);
  if (n != nullptr) scope.graph()->AddHostResource(id_, channel_, n);
  return n;
}

absl::Status IPUOutfeedQueue::Push(int replica, int num_replicas,
                                   std::vector<Tensor> values,
                                   CancellationManager* cancellation) {
  return channel_->Push(replica, num_replicas, std::move(values), cancellation);
}

absl::Status IPUOutfeedQueue::Start(int num_replicas) {
  return channel_->Start(num_replicas);
}

// Host-side reads hold the channel, so a reader blocked in Next while
// another thread destroys the queue returns Cancelled on live memory.
absl::StatusOr<OutfeedResult> IPUOutfeedQueue::Dequeue() {
  std::shared_ptr<internal::OutfeedChannel> c = channel_;
  return c->Dequeue();
}

absl::StatusOr<OutfeedElement> IPUOutfeedQueue::Next() {
  std::shared_ptr<internal::OutfeedChannel> c = channel_;
  return c->Next();
}

std::vector<OutfeedElement> IPUOutfeedQueue::TakeAvailable() {
  std::shared_ptr<internal::OutfeedChannel> c = channel_;
  return c->TakeAvailable();
}

void IPUOutfeedQueue::Close() { channel_->Close(); }

int64_t IPUOutfeedQueue::steps_delivered() const {
  return channel_->steps_delivered();
}

std::vector<OutfeedElement>::const_iterator IPUOutfeedQueue::begin() {
  iterated_ = TakeAvailable();
  return iterated_.cbegin();
}

std::vector<OutfeedElement>::const_iterator IPUOutfeedQueue::end() {
  return iterated_.cend();
}

namespace {

REGISTER_OP("OutfeedEnqueue")
    .VariadicInput("values")
    .RequiredAttr("feed_id")
    .RequiredAttr("names")
    .SetStateful()
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      if (c.num_inputs() == 0) {
        return absl::InvalidArgumentError("nothing to enqueue");
      }
      return absl::OkStatus();
    })
    .SetKernel([](KernelContext& ctx) -> absl::Status {
      const std::string& id = ctx.attr<std::string>("feed_id");
      // Held for the whole push: destroying the IPUOutfeedQueue meanwhile
      // cancels the wait instead of freeing the queue under it.
      auto queue = std::dynamic_pointer_cast<internal::OutfeedChannel>(
          ctx.node().graph()->FindHostResource(id));
      if (queue == nullptr) {
        return ctx.Error(absl::StatusCode::kFailedPrecondition, "outfeed '", id,
                         "' is not available: its IPUOutfeedQueue was destroyed "
                         "(or this graph was not built with it)");
      }
      std::vector<Tensor> values;
      int64_t bytes = 0;
      for (int i = 0; i < ctx.num_inputs(); ++i) {
        values.push_back(ctx.input(i).Copy());  // Inputs may be arena views.
        bytes += values.back().TotalBytes();
      }
      RETURN_IF_ERROR(queue->Push(ctx.env().replica, ctx.env().num_replicas,
                                  std::move(values), ctx.env().cancellation));
      if (ctx.env().device != nullptr) {
        ctx.env().device->counters().device_to_host.fetch_add(
            bytes, std::memory_order_relaxed);
      }
      return absl::OkStatus();
    })
    .NotDifferentiable("sends data to the host; has no outputs");

}  // namespace
}  // namespace ipuflow::feeds
