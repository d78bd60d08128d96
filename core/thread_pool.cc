#include "core/thread_pool.h"

#include <thread>

#include "unsupported/Eigen/CXX11/Tensor"

namespace ipuflow {

struct ThreadPool::Impl {
  explicit Impl(int n) : pool(n) {}
  Eigen::ThreadPool pool;
};

ThreadPool::ThreadPool(std::string name, int num_threads)
    : name_(std::move(name)), num_threads_(std::max(0, num_threads)) {
  if (num_threads_ > 0) {
    impl_ = std::make_unique<Impl>(num_threads_);
    device_ = std::make_unique<Eigen::ThreadPoolDevice>(&impl_->pool,
                                                        num_threads_ + 1);
  }
}

ThreadPool::~ThreadPool() {
  device_.reset();
  impl_.reset();  // Eigen::ThreadPool joins its workers.
}

void ThreadPool::Schedule(std::function<void()> fn) {
  if (impl_ == nullptr) {
    fn();
    return;
  }
  impl_->pool.Schedule(std::move(fn));
}

void ThreadPool::ParallelFor(
    int64_t n, double cost_per_unit,
    const std::function<void(int64_t, int64_t)>& fn) const {
  if (n <= 0) return;
  // Too little work to be worth a hand-off (~10 us of cycles): run inline.
  constexpr double kMinParallelCycles = 30000;
  if (device_ == nullptr || n == 1 || n * cost_per_unit < kMinParallelCycles) {
    fn(0, n);
    return;
  }
  // One shard per worker plus one for the caller, which always takes part
  // (Eigen's parallelFor may leave the caller idle, halving throughput with
  // one worker). Shards are equal, so the caller never waits long.
  const int64_t shards = std::min<int64_t>(n, num_threads_ + 1);
  const int64_t per = (n + shards - 1) / shards;
  Eigen::Barrier barrier(static_cast<unsigned>(shards - 1));
  for (int64_t s = 1; s < shards; ++s) {
    const int64_t b = s * per, e = std::min(n, b + per);
    impl_->pool.Schedule([&fn, &barrier, b, e] {
      if (b < e) fn(b, e);
      barrier.Notify();
    });
  }
  fn(0, std::min(n, per));
  barrier.Wait();
}

ThreadPool* ThreadPool::Default() {
  static ThreadPool* pool = new ThreadPool(
      "default", static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  return pool;
}

}  // namespace ipuflow
