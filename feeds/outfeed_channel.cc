// The device side of OutfeedChannel: Enqueue, the rings (Start), pushes
// through the output mode (Push, Send, RunFinished) and Shutdown. The host
// side (the list of steps and its readers) is in outfeed_channel_host.cc.
#include "feeds/outfeed_channel.h"

#include "core/ipu/ipu_device.h"

namespace ipuflow::feeds::internal {

Node* OutfeedChannel::Enqueue(
    const Scope& scope,
    const std::vector<std::pair<std::string, Output>>& values,
    const OutfeedIteration& iteration) {
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
                          {{"feed_id", id_},
                           {"names", names},
                           {"pushes_per_iteration", iteration.pushes},
                           {"sum_per_iteration", iteration.sum}},
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

absl::Status OutfeedChannel::Start(int num_replicas, bool training) {
  MutexLock l(&mu_);
  if (destroyed_) return Destroyed();
  OutputMode::Kind kind = output_mode_.kind;
  if (kind == OutputMode::Kind::kDefault) {
    kind = training ? OutputMode::Kind::kFinal : OutputMode::Kind::kAll;
  }
  kind_.store(kind, std::memory_order_relaxed);
  if (num_replicas_ == num_replicas) return absl::OkStatus();
  if (num_replicas_ != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "IPUOutfeedQueue '", id_, "' receives from ", num_replicas_,
        " replicas; it cannot also serve a program with ", num_replicas));
  }
  if (num_replicas < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "IPUOutfeedQueue '", id_, "': ", num_replicas, " replicas"));
  }
  for (int r = 0; r < num_replicas; ++r) {
    queues_.push_back(std::make_unique<BoundedQueue<std::vector<Tensor>>>(
        buffer_depth_, absl::StrCat("outfeed '", id_, "' replica ", r)));
    queues_.back()->set_adaptive_spin(kFeedSpinFloor, kFeedSpinCeiling);
  }
  pushed_ = std::vector<std::atomic<int64_t>>(num_replicas);
  held_.resize(num_replicas);
  num_replicas_ = num_replicas;
  started_replicas_.store(num_replicas, std::memory_order_release);
  return absl::OkStatus();
}

// The pushed values must be what Enqueue declared: the gatherer stacks
// them, and a mismatch would corrupt every later step.
absl::Status OutfeedChannel::CheckValues(
    const std::vector<Tensor>& values) const {
  if (!enqueued_) {
    return absl::FailedPreconditionError(
        absl::StrCat("IPUOutfeedQueue '", id_,
                     "': Push before Enqueue declared what it carries"));
  }
  if (values.size() != names_.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "IPUOutfeedQueue '", id_, "' carries ", names_.size(), " tensor(s) (",
        NameList(names_), "); got ", values.size()));
  }
  for (size_t i = 0; i < values.size(); ++i) {
    const Tensor& t = values[i];
    const TensorShape& want = shapes_[i];
    bool shape_ok = t.shape().rank() == want.rank();
    for (int d = 0; shape_ok && d < want.rank(); ++d) {
      shape_ok = want.dim(d) < 0 || want.dim(d) == t.shape().dim(d);
    }
    if (t.dtype() != dtypes_[i] || !shape_ok) {
      return absl::InvalidArgumentError(
          absl::StrCat("IPUOutfeedQueue '", id_, "': tensor '", names_[i],
                       "' is ", DTypeName(t.dtype()), t.shape().DebugString(),
                       ", but the outfeed carries ", DTypeName(dtypes_[i]),
                       want.DebugString()));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> OutfeedChannel::Push(int replica, int num_replicas,
                                          std::vector<Tensor> values,
                                          CancellationManager* cancellation,
                                          int64_t iteration, IPUDevice* device,
                                          const OutfeedIteration& group) {
  if (closed_.load(std::memory_order_acquire)) {
    return absl::FailedPreconditionError(
        absl::StrCat("IPUOutfeedQueue '", id_,
                     "' is closed: nothing can be enqueued after "
                     "Close(); create a new outfeed for another stream"));
  }
  RETURN_IF_ERROR(CheckValues(values));
  // Per element: check without mu_ once started (Start rechecks under it).
  if (started_replicas_.load(std::memory_order_acquire) != num_replicas) {
    RETURN_IF_ERROR(Start(num_replicas));
  }
  if (replica < 0 || replica >= num_replicas) {
    return absl::InvalidArgumentError(absl::StrCat("IPUOutfeedQueue '", id_,
                                                   "': replica ", replica,
                                                   " of ", num_replicas));
  }
  if (group.pushes > 1 || group.sum) {
    // A pipeline's micro-batches: `group.pushes` make one device iteration,
    // summed into one element with `group.sum`.
    Held& held = held_[replica];
    const int64_t push = held.pushes++;
    if (iteration < 0) iteration = push / group.pushes;
    if (group.sum) {
      if (held.group_sum.empty()) {
        held.group_sum = std::move(values);
      } else {
        for (size_t i = 0; i < values.size(); ++i) {
          absl::Status s = AddInto(&held.group_sum[i], values[i]);
          if (!s.ok()) {
            return absl::InvalidArgumentError(
                absl::StrCat("IPUOutfeedQueue '", id_, "' sum of '", names_[i],
                             "' over an iteration's ", group.pushes,
                             " pushes: ", s.message()));
          }
        }
      }
      if ((push + 1) % group.pushes != 0) return false;
      values = std::move(held.group_sum);
      held.group_sum.clear();
    }
  }
  const OutputMode::Kind kind = kind_.load(std::memory_order_relaxed);
  if (kind == OutputMode::Kind::kAll) {
    RETURN_IF_ERROR(Send(replica, std::move(values), cancellation, device));
    return true;
  }
  Held& held = held_[replica];
  held.device = device;
  if (iteration < 0) iteration = held.iterations;
  held.iterations = std::max(held.iterations, iteration + 1);
  switch (kind) {
    case OutputMode::Kind::kEveryN:
      if ((iteration + 1) % output_mode_.period != 0) return false;
      RETURN_IF_ERROR(Send(replica, std::move(values), cancellation, device));
      return true;
    case OutputMode::Kind::kFinal:
      held.values = std::move(values);
      return false;
    case OutputMode::Kind::kSum:
      if (held.values.empty()) {
        held.values = std::move(values);
        return false;
      }
      for (size_t i = 0; i < values.size(); ++i) {
        absl::Status s = AddInto(&held.values[i], values[i]);
        if (!s.ok()) {
          return absl::InvalidArgumentError(
              absl::StrCat("IPUOutfeedQueue '", id_, "' (Sum) of '", names_[i],
                           "' over the iterations: ", s.message()));
        }
      }
      return false;
    default:
      RETURN_IF_ERROR(Send(replica, std::move(values), cancellation, device));
      return true;
  }
}

absl::Status OutfeedChannel::Send(int replica, std::vector<Tensor> values,
                                  CancellationManager* cancellation,
                                  IPUDevice* device) {
  int64_t bytes = 0;
  for (const Tensor& t : values) bytes += t.TotalBytes();
  RETURN_IF_ERROR(queues_[replica]->Push(std::move(values), cancellation));
  pushed_[replica].fetch_add(1, std::memory_order_release);
  bool wake;
  {
    MutexLock l(&mu_);
    defer_wake_ = true;
    GatherLocked();
    defer_wake_ = false;
    wake = wake_deferred_;
    wake_deferred_ = false;
  }
  if (wake) cv_.SignalAll();
  if (device != nullptr) {
    device->counters().device_to_host.fetch_add(bytes,
                                                std::memory_order_relaxed);
  }
  return absl::OkStatus();
}

void OutfeedChannel::ResetHeld() {
  for (Held& h : held_) h = Held();
}

// After every replica's thread finished the run (the executable joined them).
absl::Status OutfeedChannel::RunFinished() {
  if (started_replicas_.load(std::memory_order_acquire) == 0) {
    return absl::OkStatus();
  }
  const OutputMode::Kind kind = kind_.load(std::memory_order_relaxed);
  absl::Status status;
  for (int r = 0; r < static_cast<int>(held_.size()) && status.ok(); ++r) {
    Held& h = held_[r];
    if (kind == OutputMode::Kind::kEveryN && h.iterations > 0) {
      const int64_t n = output_mode_.period;
      if (n > h.iterations) {
        status = absl::InvalidArgumentError(absl::StrCat(
            "IPUOutfeedQueue '", id_, "' (", output_mode_.DebugString(),
            "): the run made ", h.iterations,
            " device iteration(s): Return "
            "period must be <= to the number of batches per step"));
      } else if (h.iterations % n != 0) {
        status = absl::InvalidArgumentError(absl::StrCat(
            "IPUOutfeedQueue '", id_, "' (", output_mode_.DebugString(),
            "): the run made ", h.iterations,
            " device iteration(s): Return "
            "period must be a factor of the number of batches per step"));
      }
    } else if ((kind == OutputMode::Kind::kFinal ||
                kind == OutputMode::Kind::kSum) &&
               !h.values.empty()) {
      status = Send(r, std::move(h.values), nullptr, h.device);
    }
  }
  ResetHeld();
  return status;
}

absl::StatusOr<OutfeedElement> OutfeedChannel::MakeStep(
    std::vector<std::vector<Tensor>> per_replica) const {
  OutfeedElement step;
  step.names = names_;
  step.tensors.reserve(names_.size());
  for (size_t i = 0; i < names_.size(); ++i) {
    if (per_replica.size() == 1) {
      step.tensors.push_back(std::move(per_replica[0][i]));
    } else {
      std::vector<Tensor> parts;
      for (auto& r : per_replica) parts.push_back(std::move(r[i]));
      absl::StatusOr<Tensor> stacked = Stack(parts);
      if (!stacked.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("IPUOutfeedQueue '", id_, "': replicas pushed '",
                         names_[i], "' with different shapes in one step: ",
                         stacked.status().message()));
      }
      step.tensors.push_back(*std::move(stacked));
    }
  }
  return step;
}

void OutfeedChannel::Shutdown() {
  {
    MutexLock l(&mu_);
    if (destroyed_) return;
    destroyed_ = true;
    destroyed_hint_.store(true, std::memory_order_release);
    cv_.SignalAll();
  }
  // queues_ is fixed: Start can no longer run.
  for (auto& q : queues_) q->Cancel(Destroyed());
}

}  // namespace ipuflow::feeds::internal
