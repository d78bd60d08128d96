#include "core/thread_pool.h"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <memory>
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
      return absl::ResourceExhaustedError(
          absl::StrCat("cannot start a thread for ", what,
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
    absl::StatusOr<std::thread> t =
        StartThread(absl::StrCat("thread pool '", name_, "' (worker ", i + 1,
                                 " of ", num_threads, ")"),
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
  // The pool's name on its threads (at most 15 characters: Linux's limit),
  // for top -H, perf and debuggers: "IPU 0 worker", "ipu0-intra-op".
  pthread_setname_np(pthread_self(), name_.substr(0, 15).c_str());
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

namespace {

int Cores() {
  static const int cores =
      static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return cores;
}

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// One ParallelFor: shards claimed from `next` by the caller and by the
// workers' tasks. Shared (shared_ptr) with the tasks, because a task may
// start after the caller has returned; it then claims nothing and never
// touches `fn`, which is valid until `done` reaches `shards`.
struct ForkJoin {
  const std::function<void(int64_t, int64_t)>* fn;
  int64_t n, shards, per;
  std::atomic<int64_t> next{0};
  std::atomic<int64_t> done{0};
  Mutex mu;
  CondVar cv;

  // Runs unclaimed shards until none is left.
  void Work() {
    for (;;) {
      const int64_t s = next.fetch_add(1, std::memory_order_relaxed);
      if (s >= shards) return;
      const int64_t b = s * per, e = std::min(n, b + per);
      if (b < e) (*fn)(b, e);
      // Release: the shard's writes are visible to the caller's acquire.
      if (done.fetch_add(1, std::memory_order_acq_rel) + 1 == shards) {
        MutexLock l(&mu);
        cv.SignalAll();
      }
    }
  }

  bool Finished() const {
    return done.load(std::memory_order_acquire) == shards;
  }
};

}  // namespace

int ThreadPool::Parallelism() const {
  return std::min(num_threads() + 1, Cores());
}

int64_t ThreadPool::ShardCount(int64_t n, double cost_per_unit,
                               int parallelism) {
  if (n <= 0) return 0;
  const double by_work = static_cast<double>(n) * std::max(0.0, cost_per_unit) /
                         kMinCyclesPerShard;
  int64_t shards = std::min<int64_t>(n, std::max(1, parallelism));
  if (by_work < static_cast<double>(shards)) {
    shards = static_cast<int64_t>(by_work);  // Floor; >= 0.
  }
  return std::max<int64_t>(1, shards);
}

void ThreadPool::ParallelFor(
    int64_t n, double cost_per_unit,
    const std::function<void(int64_t, int64_t)>& fn) const {
  if (n <= 0) return;
  const int64_t shards = ShardCount(n, cost_per_unit, Parallelism());
  if (shards <= 1) {
    fn(0, n);
    return;
  }
  auto state = std::make_shared<ForkJoin>();
  state->fn = &fn;
  state->n = n;
  state->per = (n + shards - 1) / shards;
  state->shards = (n + state->per - 1) / state->per;
  {
    MutexLock l(&mu_);
    for (int64_t s = 1; s < state->shards; ++s) {
      tasks_.push_back([state] { state->Work(); });
      cv_.Signal();  // One worker per task: the others sleep on.
    }
  }
  state->Work();
  // Every shard is claimed; wait for those still running on workers, for a
  // moment by spinning (a shard's tail is usually short), then blocking.
  for (int i = 0; i < 2000 && !state->Finished(); ++i) CpuRelax();
  if (!state->Finished()) {
    MutexLock l(&state->mu);
    state->cv.Await(&state->mu, [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return state->Finished();
    });
  }
}

ThreadPool* ThreadPool::Default() {
  static ThreadPool* pool = new ThreadPool(
      "default",
      static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  return pool;
}

}  // namespace ipuflow
