// SpinUntil: the bounded busy-wait that the emulated IPU's blocking channels
// (BoundedQueue, CollectiveGroup's barriers, the outfeed's host list) try
// before they sleep on a condition variable. A futex wake-up costs 5-50 us
// on a virtual machine (the sleeper's core leaves its idle state); when the
// other side answers within a few microseconds, spinning on an atomic hint
// hands over without it.
//
//   if (!SpinUntil([&] { return ready.load(std::memory_order_acquire); },
//                  kSpinBudget)) {
//     MutexLock l(&mu);  // The slow path: recheck under the lock, sleep.
//     ...
//   }
//
// Bounded: at most `budget` of pause instructions (the time is read every
// 32 pauses), then `yields` sched_yields, which let the other side run when
// it shares our core (2 cores, several busy threads). Never unbounded: the
// caller always falls back to sleeping, so an idle partner costs one budget
// of CPU per wait, not a core.
//
// `yield_every` (0: never) also yields that often during the spin: with
// more busy threads than cores (2 vCPUs, an IPU thread, a host thread and a
// reader), the thread that must answer may be waiting for our core, and a
// pure pause loop would keep it off until the scheduler's next tick.
//
// AdaptiveSpin learns a budget from how long the partner took to answer
// recent waits: the round trip of a busy feed spins without a futex wake-up,
// an idle partner gets only the floor.
//
// Thread safety: SpinUntil is a free function; `ready` is called on the
// calling thread and must only read atomics (it runs without any lock
// held). AdaptiveSpin may be used from any thread (relaxed atomics: it is a
// statistic, and a lost update only delays the adaptation).
#ifndef IPUFLOW_CORE_IPU_SPIN_WAIT_H_
#define IPUFLOW_CORE_IPU_SPIN_WAIT_H_

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

namespace ipuflow {

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Returns true as soon as `ready()` does; false once the budget is spent.
template <typename Fn>
bool SpinUntil(
    Fn ready, std::chrono::nanoseconds budget, int yields = 4,
    std::chrono::nanoseconds yield_every = std::chrono::nanoseconds::zero()) {
  if (ready()) return true;
  auto now = std::chrono::steady_clock::now();
  const auto deadline = now + budget;
  auto next_yield = yield_every.count() > 0 ? now + yield_every : deadline;
  for (;;) {
    for (int i = 0; i < 32; ++i) {
      CpuRelax();
      if (ready()) return true;
    }
    now = std::chrono::steady_clock::now();
    if (now >= deadline) break;
    if (now >= next_yield) {
      std::this_thread::yield();
      if (ready()) return true;
      next_yield = now + yield_every;
    }
  }
  for (int i = 0; i < yields; ++i) {
    std::this_thread::yield();
    if (ready()) return true;
  }
  return false;
}

// A wait's spin budget from its partner's recent answer times (an
// exponential average, weight 1/4): about twice the average, within
// [floor, ceiling]; once the average exceeds the ceiling (the partner is
// idle or slow, and a wake-up costs little beside its delay), the floor.
// Record the time from the start of a wait to the partner's answer - when
// the wait slept, the time the partner signalled, not when the sleeper woke,
// or a slept wait (a wake-up costs 5-50 us) would make spinning look
// useless and keep it off.
class AdaptiveSpin {
 public:
  using ns = std::chrono::nanoseconds;
  AdaptiveSpin(ns floor, ns ceiling) { set_limits(floor, ceiling); }

  // REQUIRES: floor <= ceiling. floor == ceiling: a fixed budget.
  void set_limits(ns floor, ns ceiling) {
    floor_ns_.store(floor.count(), std::memory_order_relaxed);
    ceiling_ns_.store(ceiling.count(), std::memory_order_relaxed);
    average_ns_.store(floor.count() / 2,
                      std::memory_order_relaxed);  // Budget: floor.
  }
  ns budget() const {
    const int64_t floor = floor_ns_.load(std::memory_order_relaxed);
    const int64_t ceiling = ceiling_ns_.load(std::memory_order_relaxed);
    const int64_t average = average_ns_.load(std::memory_order_relaxed);
    if (average > ceiling) return ns(floor);
    return ns(std::min(std::max(2 * average, floor), ceiling));
  }
  void Record(ns answered_after) {
    const int64_t ceiling = ceiling_ns_.load(std::memory_order_relaxed);
    // Capped, so one long idle spell is forgotten after a few quick answers.
    const int64_t sample = std::min<int64_t>(
        std::max<int64_t>(answered_after.count(), 0), 4 * ceiling);
    const int64_t average = average_ns_.load(std::memory_order_relaxed);
    average_ns_.store(average + (sample - average) / 4,
                      std::memory_order_relaxed);
  }

 private:
  std::atomic<int64_t> floor_ns_{0};
  std::atomic<int64_t> ceiling_ns_{0};
  std::atomic<int64_t> average_ns_{0};
};

}  // namespace ipuflow

#endif  // IPUFLOW_CORE_IPU_SPIN_WAIT_H_
