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
// Thread safety: a free function; `ready` is called on the calling thread
// and must only read atomics (it runs without any lock held).
#ifndef IPUFLOW_CORE_IPU_SPIN_WAIT_H_
#define IPUFLOW_CORE_IPU_SPIN_WAIT_H_

#include <chrono>
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
bool SpinUntil(Fn ready, std::chrono::nanoseconds budget, int yields = 4) {
  if (ready()) return true;
  const auto deadline = std::chrono::steady_clock::now() + budget;
  for (;;) {
    for (int i = 0; i < 32; ++i) {
      CpuRelax();
      if (ready()) return true;
    }
    if (std::chrono::steady_clock::now() >= deadline) break;
  }
  for (int i = 0; i < yields; ++i) {
    std::this_thread::yield();
    if (ready()) return true;
  }
  return false;
}

}  // namespace ipuflow

#endif  // IPUFLOW_CORE_IPU_SPIN_WAIT_H_
