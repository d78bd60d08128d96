// BoundedQueue<T>: the one bounded channel of the emulated IPU system. It
// carries infeed elements (host -> device), outfeed elements (device ->
// host) and the activations, gradients and stashes between pipeline stages
// (pipelining/fifo.h).
//
//   BoundedQueue<Tensor> q(/*capacity=*/4, "infeed 'train' replica 0");
//   // Producers (any number of threads):
//   RETURN_IF_ERROR(q.Push(std::move(t)));
//   q.Close();                                   // no more elements
//   // Consumers (any number of threads):
//   absl::StatusOr<Tensor> t = q.Pop(cancellation);
//   if (absl::IsOutOfRange(t.status())) ...      // closed and drained
//   std::vector<Tensor> ready;                   // or every ready one at
//   RETURN_IF_ERROR(q.PopBatch(&ready, 8));      // once, under one lock
//
// Capacity is fixed (>= 1). Push blocks while full, Pop while empty;
// TryPush/TryPop never block and return Unavailable instead. Any number of
// producers and consumers; each element is delivered at most once, and in
// push order to the consumers taken together. PopBatch is Pop for a
// consumer that keeps what it took in a local cache: it takes every ready
// element (up to a limit) under one lock, so a busy single consumer (an
// infeed's device thread) touches the lock and the producer's cache lines
// once per batch instead of once per element.
//
// Ending a stream (both wake every blocked thread; the first end wins,
// except that Cancel upgrades a Close):
//  - Close(): graceful. Later pushes return Cancelled; pops deliver every
//    element whose Push returned OK, then return OutOfRange.
//  - Cancel(reason): abort. Every blocked and later Push/Pop returns `reason`
//    (Cancelled naming the queue when `reason` is OK). Elements still
//    inside are not delivered; they are destroyed by Reset or with the queue.
// Reset() reopens an ended queue for the next run: empties it, clears the
// end and the peak.
//
// A CancellationManager given to Push/Pop ends only that call: when the
// manager is (or becomes) cancelled the call returns its reason, prefixed
// with the queue's name, without taking or adding an element, and the queue
// stays usable (a system reset stops the runs blocked on an infeed without
// losing the dataset's elements).
//
// Blocking: a blocked call first spins briefly on an atomic hint (a hand-
// over on a busy queue then costs no futex wake-up; spin_wait.h), then
// sleeps on a condition variable; producers and consumers signal only when
// someone sleeps, after releasing the lock (the woken thread does not
// block again on it). The spin is bounded (default kDefaultSpinBudget), so
// a side whose partner is idle sleeps; set_adaptive_spin lets each side
// spin about as long as its partner recently took to answer, up to a
// ceiling (feeds, whose partner answers within microseconds when busy).
// Memory ordering comes from the mutex: a consumer sees everything its
// element's producer wrote before Push.
//
// Thread safety: every method except Reset and the destructor may be called
// from any thread concurrently. Reset and the destructor require that no
// thread is inside any other method.
#ifndef IPUFLOW_CORE_IPU_BOUNDED_QUEUE_H_
#define IPUFLOW_CORE_IPU_BOUNDED_QUEUE_H_

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/cancellation.h"
#include "core/ipu/spin_wait.h"
#include "core/mutex.h"
#include "core/status.h"

namespace ipuflow {

template <typename T>
class BoundedQueue {
 public:
  using value_type = T;

  // REQUIRES: capacity >= 1 (callers validate user-supplied depths). `name`
  // appears in every status message, e.g. "infeed 'train' replica 0".
  explicit BoundedQueue(size_t capacity, std::string name = "BoundedQueue");
  BoundedQueue(const BoundedQueue&) = delete;
  BoundedQueue& operator=(const BoundedQueue&) = delete;

  // Blocks while full. OK once `value` is in the queue; Cancelled after
  // Close; Cancel's reason; `cancellation`'s reason (see above). On error
  // `value` is destroyed.
  absl::Status Push(T value, CancellationManager* cancellation = nullptr);
  // As Push, but Unavailable instead of blocking; `value` is moved from
  // only when the result is OK.
  absl::Status TryPush(T&& value);

  // Blocks while empty and open. The oldest element; OutOfRange once closed
  // and drained; Cancel's reason (even if elements remain); `cancellation`'s.
  absl::StatusOr<T> Pop(CancellationManager* cancellation = nullptr);
  // As Pop, but Unavailable instead of blocking.
  absl::StatusOr<T> TryPop();
  // As Pop, but appends to *out every element ready when it wakes, oldest
  // first, up to `max` (>= 1; 0 is taken as 1): OK with at least one
  // element appended; on error *out is unchanged.
  absl::Status PopBatch(std::vector<T>* out, size_t max,
                        CancellationManager* cancellation = nullptr);
  // As PopBatch, but Unavailable instead of blocking (a consumer refilling
  // its cache before it runs dry, so the producer need not wait on a full
  // ring meanwhile). That Unavailable has no message: a poll that finds
  // nothing costs no allocation.
  absl::Status TryPopBatch(std::vector<T>* out, size_t max);

  void Close();
  void Cancel(absl::Status reason = absl::OkStatus());
  // REQUIRES: no other thread is inside the queue.
  void Reset();

  size_t size() const;
  // Most elements held at once since construction or the last Reset.
  size_t peak() const;
  size_t capacity() const { return capacity_; }
  // How long a blocked Push / Pop spins before it sleeps (0: only a few
  // yields). Thread-safe; affects calls that start after it.
  void set_spin_budget(std::chrono::nanoseconds budget) {
    push_spin_.set_limits(budget, budget);
    pop_spin_.set_limits(budget, budget);
  }
  // Each side spins about twice its partner's recent answer time, within
  // [floor, ceiling] (AdaptiveSpin); the floor once the partner is slower
  // than the ceiling. REQUIRES: floor <= ceiling.
  void set_adaptive_spin(std::chrono::nanoseconds floor,
                         std::chrono::nanoseconds ceiling) {
    push_spin_.set_limits(floor, ceiling);
    pop_spin_.set_limits(floor, ceiling);
  }
  // Current spin budgets (tests of the adaptation).
  std::chrono::nanoseconds push_spin_budget() const {
    return push_spin_.budget();
  }
  std::chrono::nanoseconds pop_spin_budget() const {
    return pop_spin_.budget();
  }
  static constexpr std::chrono::nanoseconds kDefaultSpinBudget =
      std::chrono::microseconds(5);
  const std::string& name() const { return name_; }
  // Threads asleep in Push / Pop (tests use these to block a thread for
  // sure before waking it, instead of sleeping).
  int sleeping_producers() const;
  int sleeping_consumers() const;

 private:
  enum State : int { kOpen, kClosed, kCancelled };
  enum class Ready { kYes, kBlocked, kEnded };
  // After the spin budget, a few yields, which let the other side run when
  // it shares our core (2-core machines under load).
  static constexpr int kYieldIterations = 8;
  // ... and during a spin, a yield this often (spin_wait.h; the clock is
  // read every 32 pauses, about 2 us on this EPYC, so there it is every
  // check). A 3-thread round trip on 2 busy vCPUs: 68 us without, 33 us
  // with (medians of 5, alternated).
  static constexpr std::chrono::nanoseconds kSpinYieldEvery =
      std::chrono::microseconds(1);
  using Clock = std::chrono::steady_clock;
  static int64_t NowNs() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               Clock::now().time_since_epoch())
        .count();
  }

  Ready CanPush() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Ready CanPop() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status PushEnd() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status PopEnd() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Both set *wake when a thread of the other side sleeps: the caller
  // signals it after releasing mu_.
  void PutLocked(T&& value, bool* wake) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  T TakeLocked(bool* wake) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Up to `max` (>= 1) of the oldest elements onto *out; REQUIRES count_ > 0.
  // *wake as TakeLocked's, and *wake_all when more than one slot was freed
  // (each sleeping producer may now have room).
  void TakeManyLocked(std::vector<T>* out, size_t max, bool* wake,
                      bool* wake_all) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // After mu_ is released: TakeManyLocked's answer to sleeping producers.
  void WakeProducers(bool wake, bool wake_all) {
    if (wake_all) {
      not_full_.SignalAll();
    } else if (wake) {
      not_full_.Signal();
    }
  }
  // The unlocked hint that a Pop would not block (Spin's `ready`).
  bool PopReadyHint() const {
    return ended_hint_.load(std::memory_order_acquire) ||
           count_hint_.load(std::memory_order_acquire) > 0;
  }
  // CanPop(), and the oldest element into *value when it is kYes (Pop and
  // TryPop differ only in what they do when blocked).
  Ready TakeIfReadyLocked(std::optional<T>* value, bool* wake)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const Ready r = CanPop();
    if (r == Ready::kYes) value->emplace(TakeLocked(wake));
    return r;
  }
  absl::Status CancelledBy(CancellationManager* cm) const;
  // Returns at once (0) when `ready()` (an unlocked hint) holds; else spins
  // until it does or `spin`'s budget runs out, records a spin that was
  // answered, and returns the time the wait started (ns, NowNs).
  template <typename Fn>
  int64_t Spin(AdaptiveSpin* spin, Fn ready);
  // After a sleep: the partner answered at `answered_ns` (stamped by its
  // signal), the wait began at `start_ns`.
  static void RecordSleep(AdaptiveSpin* spin, int64_t start_ns,
                          int64_t answered_ns) {
    if (start_ns > 0 && answered_ns >= start_ns) {
      spin->Record(std::chrono::nanoseconds(answered_ns - start_ns));
    }
  }
  // The slow path of Push/Pop: registers the wake-up with `cm`, sleeps on
  // `cv` until `can()` is not kBlocked or `cm` is cancelled, then `done`.
  template <typename CanFn, typename DoneFn>
  auto SleepThen(CondVar* cv, int* sleepers, CancellationManager* cm, CanFn can,
                 DoneFn done) -> decltype(done(Ready::kYes));

  const size_t capacity_;
  const std::string name_;
  mutable Mutex mu_;
  CondVar not_full_;
  CondVar not_empty_;
  std::vector<std::optional<T>> slots_ ABSL_GUARDED_BY(mu_);
  size_t head_ ABSL_GUARDED_BY(mu_) = 0;  // Slot of the oldest element.
  size_t count_ ABSL_GUARDED_BY(mu_) = 0;
  size_t peak_ ABSL_GUARDED_BY(mu_) = 0;
  State state_ ABSL_GUARDED_BY(mu_) = kOpen;
  absl::Status reason_ ABSL_GUARDED_BY(mu_);
  int sleeping_producers_ ABSL_GUARDED_BY(mu_) = 0;
  int sleeping_consumers_ ABSL_GUARDED_BY(mu_) = 0;
  // When the last put / take that had a sleeper to wake happened (NowNs):
  // the answer time of a wait that slept.
  int64_t put_answered_ns_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t take_answered_ns_ ABSL_GUARDED_BY(mu_) = 0;
  // Copies of count_ and state_ != kOpen, written under mu_, read without
  // it only by Spin (a hint; every decision is re-made under mu_). On a
  // cache line of their own, away from mu_ and from what each side's spin
  // writes (its AdaptiveSpin): a spinning side only reads the line the
  // other side writes.
  alignas(64) std::atomic<size_t> count_hint_{0};
  std::atomic<bool> ended_hint_{false};
  alignas(64) AdaptiveSpin push_spin_{kDefaultSpinBudget, kDefaultSpinBudget};
  alignas(64) AdaptiveSpin pop_spin_{kDefaultSpinBudget, kDefaultSpinBudget};
};

namespace internal {
using ::ipuflow::CpuRelax;  // Was defined here; kept for callers.
}  // namespace internal

template <typename T>
BoundedQueue<T>::BoundedQueue(size_t capacity, std::string name)
    : capacity_(capacity), name_(std::move(name)), slots_(capacity) {
  IPU_CHECK(capacity >= 1);
}

template <typename T>
template <typename Fn>
int64_t BoundedQueue<T>::Spin(AdaptiveSpin* spin, Fn ready) {
  if (ready()) return 0;
  const int64_t start = NowNs();
  if (SpinUntil(ready, spin->budget(), kYieldIterations, kSpinYieldEvery)) {
    spin->Record(std::chrono::nanoseconds(NowNs() - start));
  }
  return start;
}

template <typename T>
typename BoundedQueue<T>::Ready BoundedQueue<T>::CanPush() const {
  if (state_ != kOpen) return Ready::kEnded;
  return count_ < capacity_ ? Ready::kYes : Ready::kBlocked;
}

template <typename T>
typename BoundedQueue<T>::Ready BoundedQueue<T>::CanPop() const {
  if (state_ == kCancelled) return Ready::kEnded;
  if (count_ > 0) return Ready::kYes;
  return state_ == kClosed ? Ready::kEnded : Ready::kBlocked;
}

template <typename T>
absl::Status BoundedQueue<T>::PushEnd() const {
  if (state_ == kCancelled) return reason_;
  return absl::CancelledError(
      absl::StrCat("Push on ", name_, " after Close()"));
}

template <typename T>
absl::Status BoundedQueue<T>::PopEnd() const {
  if (state_ == kCancelled) return reason_;
  return absl::OutOfRangeError(absl::StrCat(name_, " is closed and empty"));
}

template <typename T>
void BoundedQueue<T>::PutLocked(T&& value, bool* wake) {
  slots_[(head_ + count_) % capacity_].emplace(std::move(value));
  ++count_;
  peak_ = std::max(peak_, count_);
  count_hint_.store(count_, std::memory_order_release);
  if (sleeping_consumers_ > 0) {
    put_answered_ns_ = NowNs();
    *wake = true;
  }
}

template <typename T>
T BoundedQueue<T>::TakeLocked(bool* wake) {
  std::optional<T>& slot = slots_[head_];
  T value = std::move(*slot);
  slot.reset();
  head_ = (head_ + 1) % capacity_;
  --count_;
  count_hint_.store(count_, std::memory_order_release);
  if (sleeping_producers_ > 0) {
    take_answered_ns_ = NowNs();
    *wake = true;
  }
  return value;
}

template <typename T>
void BoundedQueue<T>::TakeManyLocked(std::vector<T>* out, size_t max,
                                     bool* wake, bool* wake_all) {
  const size_t n = std::min(std::max<size_t>(max, 1), count_);
  for (size_t i = 0; i < n; ++i) {
    std::optional<T>& slot = slots_[head_];
    out->push_back(std::move(*slot));
    slot.reset();
    head_ = head_ + 1 == capacity_ ? 0 : head_ + 1;
  }
  count_ -= n;
  count_hint_.store(count_, std::memory_order_release);
  if (sleeping_producers_ > 0) {
    take_answered_ns_ = NowNs();
    *wake = true;
    *wake_all = n > 1 && sleeping_producers_ > 1;
  }
}

template <typename T>
absl::Status BoundedQueue<T>::CancelledBy(CancellationManager* cm) const {
  absl::Status r = cm->reason();
  if (r.ok()) r = absl::CancelledError("cancelled");
  return absl::Status(r.code(), absl::StrCat(name_, ": ", r.message()));
}

template <typename T>
template <typename CanFn, typename DoneFn>
auto BoundedQueue<T>::SleepThen(CondVar* cv, int* sleepers,
                                CancellationManager* cm, CanFn can, DoneFn done)
    -> decltype(done(Ready::kYes)) {
  // Registered without mu_ held: Register runs the callback at once when
  // already cancelled, and the callback takes mu_.
  int token = -1;
  if (cm != nullptr) {
    token = cm->Register([this] {
      MutexLock l(&mu_);
      not_full_.SignalAll();
      not_empty_.SignalAll();
    });
  }
  auto result = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    MutexLock l(&mu_);
    ++*sleepers;
    Ready r = can();
    while (r == Ready::kBlocked && (cm == nullptr || !cm->cancelled())) {
      cv->Wait(&mu_);
      r = can();
    }
    --*sleepers;
    // Still blocked means cancelled: an element (or slot) that arrived is
    // taken first, so leaving swallows no Signal meant for another sleeper.
    if (r == Ready::kBlocked) return decltype(done(r))(CancelledBy(cm));
    return done(r);
  }();
  if (cm != nullptr) cm->Unregister(token);
  return result;
}

template <typename T>
absl::Status BoundedQueue<T>::Push(T value, CancellationManager* cm) {
  if (cm != nullptr && cm->cancelled()) return CancelledBy(cm);
  const int64_t start = Spin(&push_spin_, [this] {
    return ended_hint_.load(std::memory_order_acquire) ||
           count_hint_.load(std::memory_order_acquire) < capacity_;
  });
  bool wake = false;
  Ready r;
  {
    MutexLock l(&mu_);
    r = CanPush();
    if (r == Ready::kYes) PutLocked(std::move(value), &wake);
    if (r == Ready::kEnded) return PushEnd();
  }
  if (wake) not_empty_.Signal();
  if (r == Ready::kYes) return absl::OkStatus();
  absl::Status s = SleepThen(
      &not_full_, &sleeping_producers_, cm,
      [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return CanPush(); },
      [this, &value, &wake, start](Ready r)
          ABSL_NO_THREAD_SAFETY_ANALYSIS -> absl::Status {
            if (r == Ready::kEnded) return PushEnd();
            RecordSleep(&push_spin_, start, take_answered_ns_);
            PutLocked(std::move(value), &wake);
            return absl::OkStatus();
          });
  if (wake) not_empty_.Signal();
  return s;
}

template <typename T>
absl::Status BoundedQueue<T>::TryPush(T&& value) {
  bool wake = false;
  {
    MutexLock l(&mu_);
    switch (CanPush()) {
      case Ready::kYes:
        PutLocked(std::move(value), &wake);
        break;
      case Ready::kEnded:
        return PushEnd();
      case Ready::kBlocked:
        return absl::UnavailableError(
            absl::StrCat(name_, " is full (capacity ", capacity_, ")"));
    }
  }
  if (wake) not_empty_.Signal();
  return absl::OkStatus();
}

template <typename T>
absl::StatusOr<T> BoundedQueue<T>::Pop(CancellationManager* cm) {
  if (cm != nullptr && cm->cancelled()) return CancelledBy(cm);
  const int64_t start = Spin(&pop_spin_, [this] { return PopReadyHint(); });
  bool wake = false;
  std::optional<T> value;
  {
    MutexLock l(&mu_);
    if (TakeIfReadyLocked(&value, &wake) == Ready::kEnded) return PopEnd();
  }
  if (wake) not_full_.Signal();
  if (value.has_value()) return *std::move(value);
  absl::StatusOr<T> result = SleepThen(
      &not_empty_, &sleeping_consumers_, cm,
      [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return CanPop(); },
      [this, &wake, start](Ready r)
          ABSL_NO_THREAD_SAFETY_ANALYSIS -> absl::StatusOr<T> {
            if (r == Ready::kEnded) return PopEnd();
            RecordSleep(&pop_spin_, start, put_answered_ns_);
            return TakeLocked(&wake);
          });
  if (wake) not_full_.Signal();
  return result;
}

template <typename T>
absl::StatusOr<T> BoundedQueue<T>::TryPop() {
  bool wake = false;
  std::optional<T> value;
  {
    MutexLock l(&mu_);
    switch (TakeIfReadyLocked(&value, &wake)) {
      case Ready::kYes:
        break;
      case Ready::kEnded:
        return PopEnd();
      case Ready::kBlocked:
        return absl::UnavailableError(absl::StrCat(name_, " is empty"));
    }
  }
  if (wake) not_full_.Signal();
  return *std::move(value);
}

template <typename T>
absl::Status BoundedQueue<T>::PopBatch(std::vector<T>* out, size_t max,
                                       CancellationManager* cm) {
  if (cm != nullptr && cm->cancelled()) return CancelledBy(cm);
  const int64_t start = Spin(&pop_spin_, [this] { return PopReadyHint(); });
  bool wake = false;
  bool wake_all = false;
  Ready r;
  {
    MutexLock l(&mu_);
    r = CanPop();
    if (r == Ready::kEnded) return PopEnd();
    if (r == Ready::kYes) TakeManyLocked(out, max, &wake, &wake_all);
  }
  absl::Status s;
  if (r == Ready::kBlocked) {
    s = SleepThen(
        &not_empty_, &sleeping_consumers_, cm,
        [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return CanPop(); },
        [this, out, max, &wake, &wake_all, start](Ready r)
            ABSL_NO_THREAD_SAFETY_ANALYSIS -> absl::Status {
              if (r == Ready::kEnded) return PopEnd();
              RecordSleep(&pop_spin_, start, put_answered_ns_);
              TakeManyLocked(out, max, &wake, &wake_all);
              return absl::OkStatus();
            });
  }
  WakeProducers(wake, wake_all);
  return s;
}

template <typename T>
absl::Status BoundedQueue<T>::TryPopBatch(std::vector<T>* out, size_t max) {
  bool wake = false;
  bool wake_all = false;
  {
    MutexLock l(&mu_);
    switch (CanPop()) {
      case Ready::kYes:
        TakeManyLocked(out, max, &wake, &wake_all);
        break;
      case Ready::kEnded:
        return PopEnd();
      case Ready::kBlocked:
        return absl::Status(absl::StatusCode::kUnavailable, "");
    }
  }
  WakeProducers(wake, wake_all);
  return absl::OkStatus();
}

template <typename T>
void BoundedQueue<T>::Close() {
  MutexLock l(&mu_);
  if (state_ != kOpen) return;
  state_ = kClosed;
  ended_hint_.store(true, std::memory_order_release);
  not_full_.SignalAll();
  not_empty_.SignalAll();
}

template <typename T>
void BoundedQueue<T>::Cancel(absl::Status reason) {
  if (reason.ok()) {
    reason = absl::CancelledError(absl::StrCat(name_, " was cancelled"));
  }
  MutexLock l(&mu_);
  if (state_ == kCancelled) return;
  state_ = kCancelled;
  reason_ = std::move(reason);
  ended_hint_.store(true, std::memory_order_release);
  not_full_.SignalAll();
  not_empty_.SignalAll();
}

template <typename T>
void BoundedQueue<T>::Reset() {
  MutexLock l(&mu_);
  for (auto& slot : slots_) slot.reset();
  head_ = count_ = peak_ = 0;
  state_ = kOpen;
  reason_ = absl::OkStatus();
  count_hint_.store(0, std::memory_order_release);
  ended_hint_.store(false, std::memory_order_release);
}

template <typename T>
size_t BoundedQueue<T>::size() const {
  MutexLock l(&mu_);
  return count_;
}

template <typename T>
size_t BoundedQueue<T>::peak() const {
  MutexLock l(&mu_);
  return peak_;
}

template <typename T>
int BoundedQueue<T>::sleeping_producers() const {
  MutexLock l(&mu_);
  return sleeping_producers_;
}

template <typename T>
int BoundedQueue<T>::sleeping_consumers() const {
  MutexLock l(&mu_);
  return sleeping_consumers_;
}

}  // namespace ipuflow

#endif  // IPUFLOW_CORE_IPU_BOUNDED_QUEUE_H_
