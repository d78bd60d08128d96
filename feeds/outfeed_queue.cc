#include "feeds/outfeed_queue.h"

#include <atomic>
#include <chrono>
#include <deque>

#include "absl/strings/str_cat.h"
#include "core/ipu/bounded_queue.h"
#include "core/ipu/ipu_device.h"
#include "core/ipu/spin_wait.h"
#include "core/kernel.h"
#include "core/mutex.h"
#include "core/op_registry.h"
#include "feeds/feed_channel.h"

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

namespace {
std::string NameList(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names)
    absl::StrAppend(&out, out.empty() ? "" : ", ", "'", n, "'");
  return out.empty() ? "none" : out;
}
}  // namespace

absl::StatusOr<Tensor> OutfeedResult::at(const std::string& name) const {
  for (size_t i = 0; i < names.size() && i < tensors.size(); ++i) {
    if (names[i] == name) return tensors[i];
  }
  return absl::NotFoundError(absl::StrCat("outfeed result has no tensor '",
                                          name, "'; it has ", NameList(names)));
}

absl::StatusOr<Tensor> OutfeedResult::at(size_t index) const {
  if (index < tensors.size()) return tensors[index];
  return absl::NotFoundError(absl::StrCat("outfeed result has no tensor ",
                                          index, "; it has ", tensors.size(),
                                          " (", NameList(names), ")"));
}

const Tensor& OutfeedResult::operator[](const std::string& name) const {
  for (size_t i = 0; i < names.size() && i < tensors.size(); ++i) {
    if (names[i] == name) return tensors[i];
  }
  static const Tensor* const kInvalid = new Tensor();
  return *kInvalid;
}

std::string OutputMode::DebugString() const {
  switch (kind) {
    case Kind::kAll:
      return "All";
    case Kind::kFinal:
      return "Final";
    case Kind::kSum:
      return "Sum";
    case Kind::kEveryN:
      return absl::StrCat("EveryN(", period, ")");
    case Kind::kDefault:
      return "Default";
  }
  return "?";
}

namespace internal {

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

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Everything behind an IPUOutfeedQueue: one bounded queue per replica that
// the device pushes to, and the host-side list of steps. A step moves from
// the rings to the list on the thread that completes it (the last replica
// to push, or the reader that makes room): no gathering thread, one hop
// fewer between the device and Next.
// Shared: the IPUOutfeedQueue owns it, the graph refers to it weakly, and a
// kernel inside Push holds it.
class OutfeedChannel : public HostResource {
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
  OutfeedMode mode() const { return mode_; }
  OutputMode output_mode() const { return output_mode_; }

  Node* Enqueue(const Scope& scope,
                const std::vector<std::pair<std::string, Output>>& values);
  absl::Status Start(int num_replicas, bool training = false);
  // Applies the output mode, then Send; true if the values were sent now.
  absl::StatusOr<bool> Push(int replica, int num_replicas,
                            std::vector<Tensor> values,
                            CancellationManager* cancellation,
                            int64_t iteration, IPUDevice* device);
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

  // Callers inside the IPUOutfeedQueue's methods: its destructor waits for
  // them to leave (Shutdown has woken them).
  void Enter();
  void Leave();
  void AwaitCallersLeft();

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
  void WakeReaders() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
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
  // steps_.size() and destroyed_, for Next's spin (decided under mu_).
  std::atomic<size_t> steps_hint_{0};
  std::atomic<bool> destroyed_hint_{false};
  int callers_ ABSL_GUARDED_BY(mu_) = 0;
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
  Node* n =
      scope.AddNode("OutfeedEnqueue", inputs,
                    {{"feed_id", id_}, {"names", names}}, "OutfeedEnqueue");
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
                                          int64_t iteration,
                                          IPUDevice* device) {
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
           destroyed_hint_.load(std::memory_order_acquire);
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
  while (steps_.empty() && !closed_.load() && !destroyed_) {
    slept = true;
    cv_.Wait(&mu_);
  }
  --waiting_readers_;
  if (slept && start > 0 && !steps_.empty() && readers_answered_ns_ >= start) {
    next_spin_.Record(std::chrono::nanoseconds(readers_answered_ns_ - start));
  }
  if (destroyed_) return Destroyed();
  // Closed: what was pushed before Close still comes out first.
  if (steps_.empty() && closed_.load()) CatchUp();
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

void OutfeedChannel::Enter() {
  MutexLock l(&mu_);
  ++callers_;
}

void OutfeedChannel::Leave() {
  MutexLock l(&mu_);
  if (--callers_ == 0) cv_.SignalAll();
}

void OutfeedChannel::AwaitCallersLeft() {
  MutexLock l(&mu_);
  cv_.Await(&mu_,
            [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return callers_ == 0; });
}

}  // namespace internal

namespace {
absl::Status CheckQueueSizes(int buffer_depth, int64_t max_host_bytes) {
  if (buffer_depth < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "IPUOutfeedQueue: buffer_depth cannot be less than 1, got ",
        buffer_depth, " (the default is ", kDefaultOutfeedBufferDepth, ")"));
  }
  if (max_host_bytes < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "IPUOutfeedQueue: max_host_bytes must be at least 1, got ",
        max_host_bytes, " (the default is ", kDefaultOutfeedHostBytes, ")"));
  }
  return absl::OkStatus();
}
}  // namespace

absl::StatusOr<std::unique_ptr<IPUOutfeedQueue>> IPUOutfeedQueue::Create(
    OutfeedMode mode, int buffer_depth, int64_t max_host_bytes) {
  return Create(OutputMode::All(), mode, buffer_depth, max_host_bytes);
}

absl::StatusOr<std::unique_ptr<IPUOutfeedQueue>> IPUOutfeedQueue::Create(
    OutputMode output_mode, OutfeedMode mode, int buffer_depth,
    int64_t max_host_bytes) {
  RETURN_IF_ERROR(CheckQueueSizes(buffer_depth, max_host_bytes));
  if (output_mode.kind == OutputMode::Kind::kEveryN && output_mode.period < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "IPUOutfeedQueue: EveryN anchor must have output_return_period set "
        "to valid positive integer, got ",
        output_mode.period));
  }
  return std::unique_ptr<IPUOutfeedQueue>(
      new IPUOutfeedQueue(output_mode, mode, buffer_depth, max_host_bytes));
}

IPUOutfeedQueue::IPUOutfeedQueue(OutputMode output_mode, OutfeedMode mode,
                                 int buffer_depth, int64_t max_host_bytes)
    : id_(absl::StrCat("outfeed_", next_id.fetch_add(1))),
      channel_(std::make_shared<internal::OutfeedChannel>(
          id_, output_mode, mode, buffer_depth, max_host_bytes)) {}

// Wakes every caller, then waits for them to leave: a monitor blocked in
// Next or a device blocked on a full ring returns Cancelled on live memory.
IPUOutfeedQueue::~IPUOutfeedQueue() {
  channel_->Shutdown();
  channel_->AwaitCallersLeft();
}

namespace {
// Holds the channel (and counts the caller) for one call.
class Call {
 public:
  explicit Call(const std::shared_ptr<internal::OutfeedChannel>& c) : c_(c) {
    c_->Enter();
  }
  ~Call() { c_->Leave(); }
  internal::OutfeedChannel* operator->() const { return c_.get(); }

 private:
  std::shared_ptr<internal::OutfeedChannel> c_;
};
}  // namespace

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
                                   CancellationManager* cancellation,
                                   int64_t iteration, IPUDevice* device) {
  return Call(channel_)
      ->Push(replica, num_replicas, std::move(values), cancellation, iteration,
             device)
      .status();
}

absl::Status IPUOutfeedQueue::RunFinished() {
  return Call(channel_)->RunFinished();
}

OutputMode IPUOutfeedQueue::output_mode() const {
  return channel_->output_mode();
}

void IPUOutfeedQueue::RunStopped(const absl::Status& status) {
  Call(channel_)->RunStopped(status);
}

absl::Status IPUOutfeedQueue::Start(int num_replicas, bool training) {
  return Call(channel_)->Start(num_replicas, training);
}

absl::StatusOr<OutfeedResult> IPUOutfeedQueue::Dequeue() {
  return Call(channel_)->Dequeue();
}

absl::StatusOr<OutfeedElement> IPUOutfeedQueue::Next() {
  return Call(channel_)->Next();
}

std::vector<OutfeedElement> IPUOutfeedQueue::TakeAvailable() {
  return Call(channel_)->TakeAvailable();
}

void IPUOutfeedQueue::Close() { channel_->Close(); }

int64_t IPUOutfeedQueue::steps_delivered() const {
  return channel_->steps_delivered();
}

int64_t IPUOutfeedQueue::host_bytes() const { return channel_->host_bytes(); }

int IPUOutfeedQueue::waiting_readers() const {
  return channel_->waiting_readers();
}

int IPUOutfeedQueue::waiting_pushes() const {
  return channel_->waiting_pushes();
}

int64_t IPUOutfeedQueue::peak_host_bytes() const {
  return channel_->peak_host_bytes();
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
    .RequiredAttr("feed_id", AttrType::kString)
    .RequiredAttr("names", AttrType::kStringList)
    .SetStateful()
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      if (c.num_inputs() == 0) {
        return absl::InvalidArgumentError("nothing to enqueue");
      }
      return absl::OkStatus();
    })
    .SetKernel([](KernelContext& ctx) -> absl::Status {
      // Held for the whole push (feed_channel.h).
      ASSIGN_OR_RETURN(std::shared_ptr<internal::OutfeedChannel> queue,
                       feeds_internal::FeedChannel<internal::OutfeedChannel>(
                           ctx, "outfeed", "IPUOutfeedQueue"));
      std::vector<Tensor> values;
      values.reserve(ctx.num_inputs());
      for (int i = 0; i < ctx.num_inputs(); ++i) {
        values.push_back(ctx.input(i).Copy());  // Inputs may be arena views.
      }
      return queue
          ->Push(ctx.env().replica, ctx.env().num_replicas, std::move(values),
                 ctx.env().cancellation, /*iteration=*/-1, ctx.env().device)
          .status();
    })
    .NotDifferentiable("sends data to the host; has no outputs");

}  // namespace
}  // namespace ipuflow::feeds
