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
  if (device_ == nullptr || n == 1) {
    fn(0, n);
    return;
  }
  device_->parallelFor(
      n, Eigen::TensorOpCost(0, 0, cost_per_unit),
      [&fn](Eigen::Index b, Eigen::Index e) { fn(b, e); });
}

ThreadPool* ThreadPool::Default() {
  static ThreadPool* pool = new ThreadPool(
      "default", static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  return pool;
}

}  // namespace ipuflow
