#include "feeds/outfeed_queue.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "core/ipu/ipu_device.h"
#include "core/kernel.h"
#include "core/op_registry.h"

namespace ipuflow::feeds {
namespace {

Mutex registry_mu;
std::map<std::string, IPUOutfeedQueue*>& Registry() {
  static auto* registry = new std::map<std::string, IPUOutfeedQueue*>();
  return *registry;
}
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
    : mode_(mode),
      buffer_depth_(buffer_depth),
      id_(absl::StrCat("outfeed_", next_id.fetch_add(1))) {
  MutexLock l(&registry_mu);
  Registry()[id_] = this;
}

IPUOutfeedQueue::~IPUOutfeedQueue() {
  {
    MutexLock l(&registry_mu);
    Registry().erase(id_);
  }
  for (auto& ring : rings_) {
    ring->Cancel(absl::CancelledError(
        absl::StrCat("IPUOutfeedQueue '", id_, "' was destroyed")));
  }
  if (host_thread_.joinable()) host_thread_.join();
  MutexLock l(&mu_);
  destroyed_ = true;
  cv_.SignalAll();
}

IPUOutfeedQueue* IPUOutfeedQueue::Find(const std::string& id) {
  MutexLock l(&registry_mu);
  auto it = Registry().find(id);
  return it == Registry().end() ? nullptr : it->second;
}

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

absl::Status IPUOutfeedQueue::Start(int num_replicas) {
  MutexLock l(&mu_);
  if (num_replicas_ == num_replicas) return absl::OkStatus();
  if (num_replicas_ != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "IPUOutfeedQueue '", id_, "' receives from ", num_replicas_,
        " replicas; it cannot also serve a program with ", num_replicas));
  }
  for (int r = 0; r < num_replicas; ++r) {
    rings_.push_back(std::make_unique<RingBuffer<std::vector<Tensor>>>(
        buffer_depth_, absl::StrCat("outfeed '", id_, "' replica ", r)));
  }
  pushed_ = std::vector<std::atomic<int64_t>>(num_replicas);
  num_replicas_ = num_replicas;
  host_thread_ = std::thread([this] { HostLoop(); });
  started_replicas_.store(num_replicas, std::memory_order_release);
  return absl::OkStatus();
}

absl::Status IPUOutfeedQueue::Push(int replica, int num_replicas,
                                   std::vector<Tensor> values,
                                   CancellationManager* cancellation) {
  // Per element: check without mu_ once started (Start rechecks under it).
  if (started_replicas_.load(std::memory_order_acquire) != num_replicas) {
    RETURN_IF_ERROR(Start(num_replicas));
  }
  auto& ring = *rings_[replica];
  int token = -1;
  if (cancellation != nullptr) {
    token = cancellation->Register([&ring, this] {
      ring.Cancel(absl::CancelledError(absl::StrCat(
          "IPUOutfeedQueue '", id_, "': the IPU system was reset")));
    });
  }
  absl::Status s = ring.Push(std::move(values));
  if (cancellation != nullptr) cancellation->Unregister(token);
  if (s.ok()) pushed_[replica].fetch_add(1, std::memory_order_release);
  return s;
}

OutfeedElement IPUOutfeedQueue::MakeStep(
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
void IPUOutfeedQueue::HostLoop() {
  for (;;) {
    std::vector<std::vector<Tensor>> per_replica;
    for (auto& ring : rings_) {
      absl::StatusOr<std::vector<Tensor>> v = ring->Pop();
      if (!v.ok()) {
        // Cancelled (queue destroyed, or system reset): readers must not
        // wait for steps this thread will never gather.
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

void IPUOutfeedQueue::CatchUp() {
  if (num_replicas_ == 0) return;
  int64_t target = pushed_[0].load(std::memory_order_acquire);
  for (const auto& p : pushed_) {
    target = std::min(target, p.load(std::memory_order_acquire));
  }
  cv_.Await(&mu_, [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return gathered_ >= target || destroyed_ || host_stopped_;
  });
}

absl::StatusOr<OutfeedResult> IPUOutfeedQueue::Dequeue() {
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

absl::StatusOr<OutfeedElement> IPUOutfeedQueue::Next() {
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

std::vector<OutfeedElement> IPUOutfeedQueue::TakeAvailable() {
  MutexLock l(&mu_);
  CatchUp();
  std::vector<OutfeedElement> out(std::make_move_iterator(steps_.begin()),
                                  std::make_move_iterator(steps_.end()));
  delivered_ += static_cast<int64_t>(steps_.size());
  steps_.clear();
  return out;
}

void IPUOutfeedQueue::Close() {
  MutexLock l(&mu_);
  closed_ = true;
  cv_.SignalAll();
}

int64_t IPUOutfeedQueue::steps_delivered() const {
  MutexLock l(&mu_);
  return delivered_;
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
      IPUOutfeedQueue* queue = IPUOutfeedQueue::Find(id);
      if (queue == nullptr) {
        return ctx.Error(absl::StatusCode::kFailedPrecondition, "outfeed '", id,
                         "' does not exist (was its IPUOutfeedQueue destroyed?)");
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
