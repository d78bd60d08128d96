// ThreadPool: a named pool of worker threads, used for intra-op parallelism
// (ParallelFor) and by the executor for inter-op parallelism (Schedule).
//
//   ThreadPool pool("ipu0-intra", 2);
//   RETURN_IF_ERROR(pool.status());   // ResourceExhausted: no threads
//   pool.ParallelFor(n, /*cost_per_unit=*/64, [&](int64_t b, int64_t e) {
//     for (int64_t i = b; i < e; ++i) out[i] = f(in[i]);
//   });
//
// ParallelFor is a fork-join in which the caller claims shards too: shards
// are taken from a shared counter, so a worker that wakes late finds its
// shard done by the caller instead of making the caller wait for it, and a
// ParallelFor nested in a task of the same pool still completes (the caller
// can run every shard). How many shards a loop gets is ShardCount: at most
// one per thread that can run at once (the pool's workers plus the caller,
// capped at the machine's cores: a third thread on two cores only queues
// behind the others) and at least kMinCyclesPerShard of work each, so small
// kernels stay on the calling thread (issue 12: intra_op_threads 2 made
// small GEMMs 1.3-1.7x slower than 1 on a 2-vCPU machine).
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
  // Splits [0, n) into ShardCount(n, cost_per_unit, Parallelism()) equal
  // shards and runs fn on each, in parallel with the caller; returns when
  // all are done. `cost_per_unit` is in CPU cycles per unit of n.
  void ParallelFor(int64_t n, double cost_per_unit,
                   const std::function<void(int64_t, int64_t)>& fn) const;

  // Threads a ParallelFor can use at once: the workers plus the caller, at
  // most the machine's cores.
  int Parallelism() const;

  // The split rule, a pure function so tests can check it without timing:
  // min(n, parallelism, floor(n * cost / kMinCyclesPerShard)), at least 1
  // (0 for n <= 0). A hand-off costs a futex wake-up and the worker's
  // scheduling latency (5-30 us on a virtual machine): a shard smaller than
  // that is faster on the caller.
  static constexpr double kMinCyclesPerShard = 60000;  // ~25 us at 2.5 GHz.
  static int64_t ShardCount(int64_t n, double cost_per_unit, int parallelism);

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
