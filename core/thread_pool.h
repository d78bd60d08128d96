// ThreadPool: a named pool of worker threads, used for intra-op parallelism
// (ParallelFor) and by the executor for inter-op parallelism (Schedule).
//
//   ThreadPool pool("ipu0-intra", 2);
//   RETURN_IF_ERROR(pool.status());   // ResourceExhausted: no threads
//   pool.ParallelFor(n, /*cost_per_unit=*/64, [&](int64_t b, int64_t e) {
//     for (int64_t i = b; i < e; ++i) out[i] = f(in[i]);
//   });
//
// Never call ParallelFor from a task given to Schedule() on the same pool:
// the caller would block a worker its shards may need. The executor keeps
// inter-op and intra-op work on different pools for this reason.
//
// Thread creation can fail (a thread limit, too many threads): every thread
// in ipuflow starts through StartThread, which turns std::system_error into
// ResourceExhausted. A pool that could not start all its workers joins
// those it started, runs everything inline and reports it in status().
//
// Thread safety: all methods may be called from any thread. The destructor
// runs the tasks already scheduled, then joins the workers.
#ifndef IPUFLOW_CORE_THREAD_POOL_H_
#define IPUFLOW_CORE_THREAD_POOL_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/mutex.h"

namespace ipuflow {

// Starts a thread running `fn`; ResourceExhausted naming `what` when the
// system refuses one (std::system_error from std::thread).
absl::StatusOr<std::thread> StartThread(const std::string& what,
                                        std::function<void()> fn);

// Test hook: the next `n` calls of StartThread succeed, later ones fail as
// if the system were out of threads (n < 0: never fail; the default).
void SetThreadLimitForTesting(int n);

// Bytes of physical memory of this machine (what an allocation or an
// IPUConfig may at most ask for).
int64_t PhysicalMemoryBytes();

class ThreadPool {
 public:
  // `num_threads` workers (0 is allowed: everything then runs inline).
  // ParallelFor also uses the calling thread, so its parallelism is
  // num_threads + 1.
  ThreadPool(std::string name, int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // OK, or ResourceExhausted if the workers could not be started (the pool
  // then has none and runs everything inline).
  const absl::Status& status() const { return status_; }
  int num_threads() const { return static_cast<int>(workers_.size()); }
  const std::string& name() const { return name_; }
  void Schedule(std::function<void()> fn);
  // Splits [0, n) into equal shards, one per worker plus the caller, when
  // n * cost (cycles per unit) is worth it, and runs fn on each shard in
  // parallel; returns when all are done.
  void ParallelFor(int64_t n, double cost_per_unit,
                   const std::function<void(int64_t, int64_t)>& fn) const;

  // A process-wide pool with one worker per core, for host-side work.
  static ThreadPool* Default();

 private:
  void WorkerLoop();
  void Stop();  // Runs queued tasks, joins the workers.

  std::string name_;
  absl::Status status_;
  std::vector<std::thread> workers_;
  mutable Mutex mu_;
  mutable CondVar cv_;
  mutable std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace ipuflow

#endif  // IPUFLOW_CORE_THREAD_POOL_H_
