// RingBuffer<T>: a bounded single-producer / single-consumer queue, the
// channel between a host thread and a device thread for infeeds (host ->
// device) and outfeeds (device -> host).
//
//   RingBuffer<Tensor> infeed(/*capacity=*/4, "infeed 'train'");
//   // Host thread:
//   for (Tensor& t : batches) RETURN_IF_ERROR(infeed.Push(std::move(t)));
//   infeed.Close();
//   // Device thread:
//   while (true) {
//     absl::StatusOr<Tensor> t = infeed.Pop();
//     if (absl::IsOutOfRange(t.status())) break;  // Closed and drained.
//     RETURN_IF_ERROR(t.status());                 // Cancelled.
//     Consume(*t);
//   }
//
// Thread safety: one producer thread calls Push/TryPush and one consumer
// thread calls Pop/TryPop (the role may pass to another thread if the hand-over
// itself synchronises). Close, Cancel, size, capacity and name may be called
// from any thread, including a third one.
//
// Capacity is fixed at construction (>= 1). Push blocks while the buffer is
// full, Pop while it is empty; TryPush/TryPop never block and return
// Unavailable instead. A blocked call spins briefly (a few microseconds, then
// a few yields) and then sleeps on a condition variable: no sleep-polling.
//
// Ending a stream (both wake every blocked thread, both are idempotent):
//  - Close(): graceful. Later Push/TryPush return Cancelled. Pop keeps
//    delivering every element whose Push returned OK, then returns OutOfRange
//    ("closed and empty"). A Push racing with Close either returns OK (and its
//    element will be delivered) or returns Cancelled.
//  - Cancel(reason): abort. Every blocked and every later Push/Pop returns
//    `reason` at once (CancelledError by default; an OK reason is replaced by
//    the default). Elements still inside are not delivered: they stay in their
//    slots and are destroyed with the RingBuffer. Cancel after Close turns the
//    end into an abort; Close after Cancel, or a second Cancel, changes
//    nothing (the first reason wins).
//
// Memory ordering: when Pop returns an element, the consumer sees everything
// the producer wrote before the matching Push (the element and whatever it
// points to). When Push reuses a slot, the producer sees everything the
// consumer did before the Pop that emptied it (the moved-from slot is already
// destroyed). Close/Cancel happen-before the end status they cause.
#ifndef IPUFLOW_FEEDS_RING_BUFFER_H_
#define IPUFLOW_FEEDS_RING_BUFFER_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/mutex.h"
#include "core/status.h"

namespace ipuflow::feeds {

class RingBufferTestPeer;

template <typename T>
class RingBuffer {
 public:
  // REQUIRES: capacity >= 1 (callers validate user-supplied depths). `name`
  // appears in every status message, e.g. "infeed 'train'".
  explicit RingBuffer(size_t capacity, std::string name = "RingBuffer");
  RingBuffer(const RingBuffer&) = delete;
  RingBuffer& operator=(const RingBuffer&) = delete;
  // REQUIRES: no thread is inside any method. Destroys undelivered elements.
  ~RingBuffer() = default;

  // Blocks while full. Returns OK once `value` is in the buffer, Cancelled
  // after Close(), or the reason given to Cancel(); on error `value` is
  // destroyed. REQUIRES: called by the producer thread.
  absl::Status Push(T value);
  // As Push, but returns Unavailable instead of blocking. `value` is moved
  // from unless the result is Unavailable.
  absl::Status TryPush(T&& value);

  // Blocks while empty and open. Returns the oldest element; OutOfRange once
  // closed and drained; Cancel()'s reason once cancelled (even if elements
  // remain). REQUIRES: called by the consumer thread.
  absl::StatusOr<T> Pop();
  // As Pop, but returns Unavailable instead of blocking.
  absl::StatusOr<T> TryPop();

  void Close();
  void Cancel();
  void Cancel(absl::Status reason);

  // Approximate when producer or consumer run concurrently; in [0, capacity].
  size_t size() const;
  size_t capacity() const { return capacity_; }
  const std::string& name() const { return name_; }

 private:
  friend class RingBufferTestPeer;

  // Protocol.
  //
  // Fast path (no lock). head_ counts Pops and is written only by the
  // consumer; tail_ counts Pushes in its low 63 bits, written only by the
  // producer, and carries kClosedBit, set by Close/Cancel. Element i lives in
  // slots_[i % capacity_]. The producer fills a slot, then publishes it by a
  // CAS tail_: t -> t+1 (release); the consumer reads tail_ (acquire), moves
  // the element out, then stores head_ = h+1 (release), which hands the slot
  // back. Because the CAS fails once kClosedBit is set, "Push returned OK" and
  // "Close happened" are ordered in tail_'s modification order: a consumer
  // that sees kClosedBit also sees every count published before it, so Close
  // never loses an acknowledged element. Each side caches the other's counter
  // (cached_head_, cached_tail_) and rereads it only when the cache says
  // full/empty, which keeps the two cache lines from bouncing on every call.
  //
  // Slow path (eventcount). A side that finds the buffer full/empty spins a
  // bounded number of times, then locks mu_, sets its waiting flag, re-checks
  // the condition, and waits on its CondVar; after each wake-up it re-arms the
  // flag and re-checks. The other side, after publishing its counter, reads
  // that flag and, if set, clears it and signals under mu_ (clearing it means
  // one signal per sleep, not one per element until the sleeper runs). No
  // wake-up is lost: the waiter's (store flag; load counter) and the
  // publisher's (store counter; load flag) are all seq_cst, so at least one of
  // them sees the other's store. If the publisher sees the flag, its signal,
  // taken under mu_, reaches the waiter either before the waiter's re-check
  // (which then sees the counter, ordered by mu_) or while it waits. seq_cst
  // atomics are used rather than fences because TSAN does not model
  // atomic_thread_fence. Close/Cancel change state_ under mu_ and SignalAll,
  // and waiters re-check state_ under mu_, so they cannot be missed either.
  enum class Readiness { kReady, kBlocked, kEnded };
  enum State : int { kOpen, kClosed, kCancelled };
  static constexpr uint64_t kClosedBit = uint64_t{1} << 63;
  // Before sleeping: ~256 pauses (a few microseconds, about the cost of a
  // futex wake-up), then a few yields, which let the other side run when it
  // shares our core (2-core machines under load). Tuned with
  // ring_buffer_benchmark: below ~256 spins a capacity-4 ring sleeps on most
  // elements and hand-over costs microseconds.
  static constexpr int kSpinIterations = 256;
  static constexpr int kYieldIterations = 8;

  Readiness ProducerReadiness(uint64_t tail);
  Readiness ConsumerReadiness(uint64_t head);
  template <typename ReadinessFn>
  Readiness Await(ReadinessFn readiness, std::atomic<bool>* waiting,
                  CondVar* cv);
  void WakeIfWaiting(std::atomic<bool>* waiting, CondVar* cv);
  absl::Status Publish(uint64_t tail, T&& value);
  T Take(uint64_t head);
  absl::Status PushEndStatus();
  absl::Status PopEndStatus();
  void End(State state, absl::Status reason);

  // Read-only after construction.
  const size_t capacity_;
  const std::string name_;
  std::vector<std::optional<T>> slots_;

  // Producer's line.
  alignas(64) std::atomic<uint64_t> tail_{0};
  uint64_t cached_head_ = 0;  // Producer-only.
  // Consumer's line.
  alignas(64) std::atomic<uint64_t> head_{0};
  uint64_t cached_tail_ = 0;  // Consumer-only.
  // Read on every call, written rarely.
  alignas(64) std::atomic<int> state_{kOpen};  // Written under mu_.
  std::atomic<bool> producer_waiting_{false};  // Written under mu_.
  std::atomic<bool> consumer_waiting_{false};  // Written under mu_.
  // Slow path only.
  alignas(64) Mutex mu_;
  CondVar space_cv_;  // The producer waits here for a free slot.
  CondVar data_cv_;   // The consumer waits here for an element.
  absl::Status reason_ ABSL_GUARDED_BY(mu_);
};

namespace internal {
inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}
}  // namespace internal

template <typename T>
RingBuffer<T>::RingBuffer(size_t capacity, std::string name)
    : capacity_(capacity), name_(std::move(name)), slots_(capacity) {
  IPU_CHECK(capacity >= 1);
}

template <typename T>
absl::Status RingBuffer<T>::Push(T value) {
  const uint64_t tail = tail_.load(std::memory_order_relaxed) & ~kClosedBit;
  Readiness r = Await([this, tail] { return ProducerReadiness(tail); },
                      &producer_waiting_, &space_cv_);
  if (r == Readiness::kEnded) return PushEndStatus();
  return Publish(tail, std::move(value));
}

template <typename T>
absl::Status RingBuffer<T>::TryPush(T&& value) {
  const uint64_t tail = tail_.load(std::memory_order_relaxed) & ~kClosedBit;
  switch (ProducerReadiness(tail)) {
    case Readiness::kReady:
      return Publish(tail, std::move(value));
    case Readiness::kBlocked:
      return absl::UnavailableError(
          absl::StrCat(name_, " is full (capacity ", capacity_, ")"));
    case Readiness::kEnded:
      break;
  }
  return PushEndStatus();
}

template <typename T>
absl::StatusOr<T> RingBuffer<T>::Pop() {
  const uint64_t head = head_.load(std::memory_order_relaxed);
  Readiness r = Await([this, head] { return ConsumerReadiness(head); },
                      &consumer_waiting_, &data_cv_);
  if (r == Readiness::kEnded) return PopEndStatus();
  return Take(head);
}

template <typename T>
absl::StatusOr<T> RingBuffer<T>::TryPop() {
  const uint64_t head = head_.load(std::memory_order_relaxed);
  switch (ConsumerReadiness(head)) {
    case Readiness::kReady:
      return Take(head);
    case Readiness::kBlocked:
      return absl::UnavailableError(absl::StrCat(name_, " is empty"));
    case Readiness::kEnded:
      break;
  }
  return PopEndStatus();
}

template <typename T>
void RingBuffer<T>::Close() {
  End(kClosed, absl::OkStatus());
}

template <typename T>
void RingBuffer<T>::Cancel() {
  Cancel(absl::OkStatus());
}

template <typename T>
void RingBuffer<T>::Cancel(absl::Status reason) {
  if (reason.ok()) {
    reason = absl::CancelledError(absl::StrCat(name_, " was cancelled"));
  }
  End(kCancelled, std::move(reason));
}

template <typename T>
size_t RingBuffer<T>::size() const {
  // head first: tail_ read later is never behind it.
  const uint64_t head = head_.load(std::memory_order_acquire);
  const uint64_t tail = tail_.load(std::memory_order_acquire) & ~kClosedBit;
  const uint64_t n = tail - head;
  return n > capacity_ ? capacity_ : static_cast<size_t>(n);
}

template <typename T>
typename RingBuffer<T>::Readiness RingBuffer<T>::ProducerReadiness(
    uint64_t tail) {
  if (state_.load(std::memory_order_acquire) != kOpen) return Readiness::kEnded;
  if (tail - cached_head_ < capacity_) return Readiness::kReady;
  cached_head_ = head_.load(std::memory_order_seq_cst);
  return tail - cached_head_ < capacity_ ? Readiness::kReady
                                         : Readiness::kBlocked;
}

template <typename T>
typename RingBuffer<T>::Readiness RingBuffer<T>::ConsumerReadiness(
    uint64_t head) {
  if (state_.load(std::memory_order_acquire) == kCancelled) {
    return Readiness::kEnded;
  }
  if (head != cached_tail_) return Readiness::kReady;
  const uint64_t tail = tail_.load(std::memory_order_seq_cst);
  cached_tail_ = tail & ~kClosedBit;
  if (head != cached_tail_) return Readiness::kReady;
  return (tail & kClosedBit) ? Readiness::kEnded : Readiness::kBlocked;
}

template <typename T>
template <typename ReadinessFn>
typename RingBuffer<T>::Readiness RingBuffer<T>::Await(
    ReadinessFn readiness, std::atomic<bool>* waiting, CondVar* cv) {
  Readiness r = readiness();
  for (int i = 0; r == Readiness::kBlocked && i < kSpinIterations; ++i) {
    internal::CpuRelax();
    r = readiness();
  }
  for (int i = 0; r == Readiness::kBlocked && i < kYieldIterations; ++i) {
    std::this_thread::yield();
    r = readiness();
  }
  if (r != Readiness::kBlocked) return r;
  MutexLock l(&mu_);
  while (true) {
    // Re-armed on every round: WakeIfWaiting clears the flag when it signals.
    waiting->store(true, std::memory_order_seq_cst);
    r = readiness();
    if (r != Readiness::kBlocked) break;
    cv->Wait(&mu_);
  }
  waiting->store(false, std::memory_order_relaxed);
  return r;
}

template <typename T>
void RingBuffer<T>::WakeIfWaiting(std::atomic<bool>* waiting, CondVar* cv) {
  if (!waiting->load(std::memory_order_seq_cst)) return;
  MutexLock l(&mu_);
  // One signal per wait: until the waiter runs and re-arms, later calls skip
  // the mutex instead of signalling again.
  waiting->store(false, std::memory_order_relaxed);
  cv->Signal();
}

template <typename T>
absl::Status RingBuffer<T>::Publish(uint64_t tail, T&& value) {
  std::optional<T>& slot = slots_[tail % capacity_];
  slot.emplace(std::move(value));
  uint64_t expected = tail;
  if (!tail_.compare_exchange_strong(expected, tail + 1,
                                     std::memory_order_seq_cst,
                                     std::memory_order_relaxed)) {
    slot.reset();  // Close/Cancel set kClosedBit since we checked state_.
    return PushEndStatus();
  }
  WakeIfWaiting(&consumer_waiting_, &data_cv_);
  return absl::OkStatus();
}

template <typename T>
T RingBuffer<T>::Take(uint64_t head) {
  std::optional<T>& slot = slots_[head % capacity_];
  T value = std::move(*slot);
  slot.reset();
  head_.store(head + 1, std::memory_order_seq_cst);
  WakeIfWaiting(&producer_waiting_, &space_cv_);
  return value;
}

template <typename T>
absl::Status RingBuffer<T>::PushEndStatus() {
  MutexLock l(&mu_);
  if (state_.load(std::memory_order_relaxed) == kCancelled) return reason_;
  return absl::CancelledError(
      absl::StrCat("Push on ", name_, " after Close()"));
}

template <typename T>
absl::Status RingBuffer<T>::PopEndStatus() {
  MutexLock l(&mu_);
  if (state_.load(std::memory_order_relaxed) == kCancelled) return reason_;
  return absl::OutOfRangeError(absl::StrCat(name_, " is closed and empty"));
}

template <typename T>
void RingBuffer<T>::End(State state, absl::Status reason) {
  MutexLock l(&mu_);
  const int old = state_.load(std::memory_order_relaxed);
  if (old == kCancelled || old == state) return;
  if (state == kCancelled) reason_ = std::move(reason);
  tail_.fetch_or(kClosedBit, std::memory_order_seq_cst);
  state_.store(state, std::memory_order_release);
  space_cv_.SignalAll();
  data_cv_.SignalAll();
}

}  // namespace ipuflow::feeds

#endif  // IPUFLOW_FEEDS_RING_BUFFER_H_
