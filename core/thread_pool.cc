#include "core/thread_pool.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <system_error>

#include "absl/strings/str_cat.h"

namespace ipuflow {
namespace {
std::atomic<int> thread_limit_for_testing{-1};
}  // namespace

void SetThreadLimitForTesting(int n) { thread_limit_for_testing.store(n); }

absl::StatusOr<std::thread> StartThread(const std::string& what,
                                        std::function<void()> fn) {
  int limit = thread_limit_for_testing.load();
  while (limit >= 0) {
    if (limit == 0) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "cannot start a thread for ", what,
          ": thread limit reached (injected for testing)"));
    }
    if (thread_limit_for_testing.compare_exchange_weak(limit, limit - 1)) break;
  }
  try {
    return std::thread(std::move(fn));
  } catch (const std::system_error& e) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot start a thread for ", what, ": ", e.what()));
  }
}

int64_t PhysicalMemoryBytes() {
  static const int64_t bytes = [] {
    const long pages = sysconf(_SC_PHYS_PAGES);
    const long page = sysconf(_SC_PAGE_SIZE);
    if (pages <= 0 || page <= 0) return int64_t{1} << 40;  // Unknown: 1 TiB.
    return static_cast<int64_t>(pages) * page;
  }();
  return bytes;
}

ThreadPool::ThreadPool(std::string name, int num_threads)
    : name_(std::move(name)) {
  for (int i = 0; i < num_threads; ++i) {
    absl::StatusOr<std::thread> t = StartThread(
        absl::StrCat("thread pool '", name_, "' (worker ", i + 1, " of ",
                     num_threads, ")"),
        [this] { WorkerLoop(); });
    if (!t.ok()) {
      status_ = t.status();
      Stop();  // Joins the workers already started.
      workers_.clear();
      MutexLock l(&mu_);
      stopping_ = false;  // Everything runs inline from now on.
      return;
    }
    workers_.push_back(*std::move(t));
  }
}

ThreadPool::~ThreadPool() { Stop(); }

void ThreadPool::Stop() {
  {
    MutexLock l(&mu_);
    stopping_ = true;
    cv_.SignalAll();
  }
  for (std::thread& t : workers_) {
    if (t.joinable()) t.join();
  }
}

void ThreadPool::WorkerLoop() {
  for (;;) {
    std::function<void()> task;
    {
      MutexLock l(&mu_);
      cv_.Await(&mu_, [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
        return stopping_ || !tasks_.empty();
      });
      if (tasks_.empty()) return;  // Stopping and drained.
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

void ThreadPool::Schedule(std::function<void()> fn) {
  if (workers_.empty()) {
    fn();
    return;
  }
  MutexLock l(&mu_);
  tasks_.push_back(std::move(fn));
  cv_.Signal();
}

void ThreadPool::ParallelFor(
    int64_t n, double cost_per_unit,
    const std::function<void(int64_t, int64_t)>& fn) const {
  if (n <= 0) return;
  // Too little work to be worth a hand-off (~10 us of cycles): run inline.
  constexpr double kMinParallelCycles = 30000;
  const int workers = num_threads();
  if (workers == 0 || n == 1 || n * cost_per_unit < kMinParallelCycles) {
    fn(0, n);
    return;
  }
  // One shard per worker plus one for the caller, which always takes part.
  // Shards are equal, so the caller never waits long.
  const int64_t shards = std::min<int64_t>(n, workers + 1);
  const int64_t per = (n + shards - 1) / shards;
  Mutex done_mu;
  CondVar done_cv;
  int64_t pending = shards - 1;
  {
    MutexLock l(&mu_);
    for (int64_t s = 1; s < shards; ++s) {
      const int64_t b = s * per, e = std::min(n, b + per);
      tasks_.push_back([&fn, &done_mu, &done_cv, &pending, b, e] {
        if (b < e) fn(b, e);
        MutexLock l(&done_mu);
        if (--pending == 0) done_cv.SignalAll();
      });
    }
    cv_.SignalAll();
  }
  fn(0, std::min(n, per));
  MutexLock l(&done_mu);
  done_cv.Await(&done_mu, [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return pending == 0;
  });
}

ThreadPool* ThreadPool::Default() {
  static ThreadPool* pool = new ThreadPool(
      "default", static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  return pool;
}

}  // namespace ipuflow
