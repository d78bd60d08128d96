// ThreadPool: a named pool of worker threads with an Eigen::ThreadPoolDevice
// over it, used for intra-op parallelism (ParallelFor) and by the executor
// for inter-op parallelism (Schedule).
//
//   ThreadPool pool("ipu0-intra", 2);
//   pool.ParallelFor(n, /*cost_per_unit=*/64, [&](int64_t b, int64_t e) {
//     for (int64_t i = b; i < e; ++i) out[i] = f(in[i]);
//   });
//
// Never call ParallelFor from a task given to Schedule() on the same pool:
// the caller would block a worker its shards may need. The executor keeps
// inter-op and intra-op work on different pools for this reason.
//
// Thread safety: all methods may be called from any thread. The destructor
// waits for scheduled tasks to finish.
#ifndef IPUFLOW_CORE_THREAD_POOL_H_
#define IPUFLOW_CORE_THREAD_POOL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace Eigen {
struct ThreadPoolDevice;
}

namespace ipuflow {

class ThreadPool {
 public:
  // `num_threads` workers (0 is allowed: everything then runs inline).
  // ParallelFor also uses the calling thread, so its parallelism is
  // num_threads + 1.
  ThreadPool(std::string name, int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }
  const std::string& name() const { return name_; }
  void Schedule(std::function<void()> fn);
  // Splits [0, n) into shards by Eigen's cost model (cost in cycles per
  // unit) and runs fn on each shard, in parallel; returns when all are done.
  void ParallelFor(int64_t n, double cost_per_unit,
                   const std::function<void(int64_t, int64_t)>& fn) const;

  // A process-wide pool with one worker per core, for host-side work.
  static ThreadPool* Default();

 private:
  struct Impl;
  std::string name_;
  int num_threads_;
  std::unique_ptr<Impl> impl_;
  std::unique_ptr<Eigen::ThreadPoolDevice> device_;
};

}  // namespace ipuflow

#endif  // IPUFLOW_CORE_THREAD_POOL_H_
