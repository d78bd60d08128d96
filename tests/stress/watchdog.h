// A watchdog for stress tests: fails the process with a clear message when
// no progress was reported for `bound` (a deadlock), naming the last step.
// The bound is very generous (a busy machine is slow, not stuck); the
// default test suite never uses this.
#ifndef IPUFLOW_TESTS_STRESS_WATCHDOG_H_
#define IPUFLOW_TESTS_STRESS_WATCHDOG_H_

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>

namespace ipuflow::stress {

class Watchdog {
 public:
  explicit Watchdog(std::chrono::seconds bound) : bound_(bound) {
    thread_ = std::thread([this] { Watch(); });
  }
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> l(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  // What the test is doing now; restarts the bound.
  void Progress(std::string what) {
    std::lock_guard<std::mutex> l(mu_);
    what_ = std::move(what);
    ++generation_;
    cv_.notify_all();
  }

 private:
  void Watch() {
    std::unique_lock<std::mutex> l(mu_);
    while (!done_) {
      const uint64_t seen = generation_;
      if (!cv_.wait_for(l, bound_,
                        [&] { return done_ || generation_ != seen; })) {
        std::fprintf(stderr,
                     "WATCHDOG: no progress for %lld s (a deadlock?) while: "
                     "%s\n",
                     static_cast<long long>(bound_.count()), what_.c_str());
        std::fflush(stderr);
        std::abort();
      }
    }
  }

  const std::chrono::seconds bound_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::string what_ = "starting";
  uint64_t generation_ = 0;
  bool done_ = false;
  std::thread thread_;
};

}  // namespace ipuflow::stress

#endif  // IPUFLOW_TESTS_STRESS_WATCHDOG_H_
