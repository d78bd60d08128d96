// The host side of OutfeedChannel: complete steps move from the rings to
// the host-side list (GatherLocked), stop markers follow the steps of their
// run, and Dequeue / Next / TakeAvailable read the list.
#include <algorithm>

#include "feeds/outfeed_channel.h"

namespace ipuflow::feeds::internal {
namespace {

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

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

void OutfeedChannel::WakeReaders() {
  steps_hint_.store(steps_.size(), std::memory_order_release);
  if (waiting_readers_ > 0) {
    readers_answered_ns_ = NowNs();
    if (defer_wake_) {
      wake_deferred_ = true;
    } else {
      cv_.SignalAll();
    }
  }
}

void OutfeedChannel::Append(Entry e) {
  if (!e.stop.ok()) {
    // Consecutive stops: the latest says it all (bounded without readers).
    if (!steps_.empty() && !steps_.back().stop.ok()) steps_.pop_back();
  } else if (mode_ == OutfeedMode::kLast) {
    steps_.clear();
    host_bytes_ = 0;
  }
  host_bytes_ += e.bytes;
  peak_host_bytes_ = std::max(peak_host_bytes_, host_bytes_);
  steps_.push_back(std::move(e));
  WakeReaders();
}

void OutfeedChannel::FlushStops() {
  while (!pending_stops_.empty() && pending_stops_.front().first <= gathered_) {
    Entry e;
    e.stop = std::move(pending_stops_.front().second);
    pending_stops_.pop_front();
    Append(std::move(e));
  }
}

// One element from every replica, in replica order, per step. Only
// gatherers pop from the rings and they hold mu_, so a ring that is not
// empty stays so until popped here.
void OutfeedChannel::GatherLocked() {
  if (destroyed_ || started_replicas_.load(std::memory_order_acquire) == 0) {
    return;
  }
  while (!Full()) {
    std::vector<std::vector<Tensor>> per_replica;
    per_replica.reserve(queues_.size());
    if (queues_.size() == 1) {
      // One ring: taking says whether a step is complete (one lock of the
      // ring per step, instead of size() then TryPop; no status message).
      if (!queues_[0]->TryPopBatch(&per_replica, 1).ok()) return;
    } else {
      for (auto& q : queues_) {
        if (q->size() == 0) return;
      }
    }
    for (size_t r = per_replica.size(); r < queues_.size(); ++r) {
      auto& q = queues_[r];
      absl::StatusOr<std::vector<Tensor>> v = q->TryPop();
      if (!v.ok()) return;  // Cancelled: the queue is being destroyed.
      per_replica.push_back(*std::move(v));
    }
    absl::StatusOr<OutfeedElement> step = MakeStep(std::move(per_replica));
    Entry e;
    if (step.ok()) {
      for (const Tensor& t : step->tensors) e.bytes += t.TotalBytes();
      e.step = *std::move(step);
    } else {
      e.stop = step.status();
    }
    ++gathered_;
    Append(std::move(e));
    FlushStops();
  }
}

int64_t OutfeedChannel::CompleteSteps() const {
  if (started_replicas_.load(std::memory_order_acquire) == 0) return 0;
  int64_t target = pushed_[0].load(std::memory_order_acquire);
  for (const auto& p : pushed_) {
    target = std::min(target, p.load(std::memory_order_acquire));
  }
  return target;
}

void OutfeedChannel::RunStopped(const absl::Status& status) {
  if (status.ok()) return;
  ResetHeld();  // The replicas' threads have left the run.
  absl::Status why(status.code(),
                   absl::StrCat("the run feeding IPUOutfeedQueue '", id_,
                                "' stopped: ", status.message()));
  MutexLock l(&mu_);
  if (destroyed_) return;
  // After the steps every replica completed before the stop.
  pending_stops_.emplace_back(CompleteSteps(), std::move(why));
  FlushStops();
}

void OutfeedChannel::AddProducer() {
  MutexLock l(&mu_);
  ++producers_;
  orphaned_hint_.store(false, std::memory_order_release);
}

void OutfeedChannel::RemoveProducer(const absl::Status& why) {
  MutexLock l(&mu_);
  if (producers_ > 0) --producers_;
  if (producers_ > 0) return;
  orphaned_ = absl::CancelledError(
      absl::StrCat("IPUOutfeedQueue '", id_,
                   "': no executable can feed it any more: ", why.message()));
  orphaned_hint_.store(true, std::memory_order_release);
  cv_.SignalAll();
}

std::vector<OutfeedChannel::Entry> OutfeedChannel::TakeSteps() {
  std::vector<Entry> out;
  while (!steps_.empty()) {
    Entry& e = steps_.front();
    // Stop markers are for Next; a reader taking everything skips them.
    if (e.stop.ok()) {
      host_bytes_ -= e.bytes;
      out.push_back(std::move(e));
    }
    steps_.pop_front();
  }
  delivered_ += static_cast<int64_t>(out.size());
  steps_hint_.store(steps_.size(), std::memory_order_release);
  GatherLocked();  // Room: steps waiting in the rings come in.
  return out;
}

absl::StatusOr<OutfeedResult> OutfeedChannel::Dequeue() {
  MutexLock l(&mu_);
  if (destroyed_) return Destroyed();
  CatchUp();
  if (mode_ == OutfeedMode::kLast) {
    std::vector<Entry> taken = TakeSteps();
    if (taken.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat("IPUOutfeedQueue '", id_,
                       "': trying to get the last value from an "
                       "outfeed queue before anything was enqueued"));
    }
    delivered_ -= static_cast<int64_t>(taken.size()) - 1;
    return std::move(taken.back().step);
  }
  // Steps of different shapes (an unknown batch dimension) cannot be
  // stacked: say so and keep them for Next / TakeAvailable.
  const Entry* first = nullptr;
  int64_t index = 0;
  for (const Entry& e : steps_) {
    if (!e.stop.ok()) continue;
    if (first == nullptr) {
      first = &e;
    } else {
      for (size_t i = 0; i < names_.size(); ++i) {
        if (e.step.tensors[i].shape() != first->step.tensors[i].shape()) {
          return absl::InvalidArgumentError(absl::StrCat(
              "IPUOutfeedQueue '", id_, "': tensor '", names_[i],
              "' has different shapes across steps (",
              first->step.tensors[i].shape().DebugString(), " at the first, ",
              e.step.tensors[i].shape().DebugString(), " at step ", index,
              " of those held), so Dequeue cannot stack them; read the steps "
              "one at a time with Next() or TakeAvailable()"));
        }
      }
    }
    ++index;
  }
  std::vector<Entry> taken = TakeSteps();
  OutfeedResult result;
  result.names = names_;
  for (size_t i = 0; i < names_.size(); ++i) {
    std::vector<Tensor> parts;
    for (const Entry& e : taken) parts.push_back(e.step.tensors[i]);
    TensorShape shape = shapes_[i];
    if (num_replicas_ > 1) shape.InsertDim(0, num_replicas_);
    result.tensors.push_back(StackOrEmpty(parts, dtypes_[i], shape));
  }
  return result;
}

absl::StatusOr<OutfeedElement> OutfeedChannel::Next() {
  // A monitor usually waits for a device that is running: spin briefly on
  // the hints before sleeping (a step then costs no futex wake-up).
  auto ready = [this] {
    return steps_hint_.load(std::memory_order_acquire) > 0 ||
           closed_.load(std::memory_order_acquire) ||
           destroyed_hint_.load(std::memory_order_acquire) ||
           orphaned_hint_.load(std::memory_order_acquire);
  };
  int64_t start = 0;
  if (!ready()) {
    start = NowNs();
    if (SpinUntil(ready, next_spin_.budget(), 4, kNextYieldEvery)) {
      next_spin_.Record(std::chrono::nanoseconds(NowNs() - start));
      start = 0;
    }
  }
  MutexLock l(&mu_);
  ++waiting_readers_;
  bool slept = false;
  while (steps_.empty() && !closed_.load() && !destroyed_ && !Orphaned()) {
    slept = true;
    cv_.Wait(&mu_);
  }
  --waiting_readers_;
  if (slept && start > 0 && !steps_.empty() && readers_answered_ns_ >= start) {
    next_spin_.Record(std::chrono::nanoseconds(readers_answered_ns_ - start));
  }
  if (destroyed_) return Destroyed();
  // Closed, or nothing can push any more: what was pushed still comes out
  // first.
  if (steps_.empty()) CatchUp();
  if (!steps_.empty()) {
    Entry e = std::move(steps_.front());
    steps_.pop_front();
    steps_hint_.store(steps_.size(), std::memory_order_release);
    if (e.stop.ok()) {
      host_bytes_ -= e.bytes;
      ++delivered_;
    }
    GatherLocked();  // Room: steps waiting in the rings come in.
    if (!e.stop.ok()) return e.stop;
    return std::move(e.step);
  }
  if (!closed_.load()) return orphaned_;
  return absl::OutOfRangeError(
      absl::StrCat("IPUOutfeedQueue '", id_, "' is closed and drained"));
}

std::vector<OutfeedElement> OutfeedChannel::TakeAvailable() {
  MutexLock l(&mu_);
  CatchUp();
  std::vector<OutfeedElement> out;
  for (Entry& e : TakeSteps()) out.push_back(std::move(e.step));
  return out;
}

void OutfeedChannel::Close() {
  MutexLock l(&mu_);
  closed_.store(true, std::memory_order_release);
  cv_.SignalAll();
}

int64_t OutfeedChannel::steps_delivered() const {
  MutexLock l(&mu_);
  return delivered_;
}

int64_t OutfeedChannel::host_bytes() const {
  MutexLock l(&mu_);
  return host_bytes_;
}

int64_t OutfeedChannel::peak_host_bytes() const {
  MutexLock l(&mu_);
  return peak_host_bytes_;
}

}  // namespace ipuflow::feeds::internal
