#include "core/ipu/ipu_device.h"

namespace ipuflow {
namespace {
thread_local IPUDevice* current_device = nullptr;
}  // namespace

IPUDevice* IPUDevice::Current() { return current_device; }

IPUDevice::IPUDevice(int id, int64_t memory_budget_bytes, int intra_op_threads)
    : id_(id),
      memory_budget_(memory_budget_bytes),
      intra_op_("ipu" + std::to_string(id) + "-intra-op", intra_op_threads),
      worker_([this] { WorkerLoop(); }) {}

IPUDevice::~IPUDevice() {
  {
    MutexLock l(&mu_);
    stopping_ = true;
    cv_.SignalAll();
  }
  worker_.join();
}

void IPUDevice::Submit(std::function<void()> task) {
  MutexLock l(&mu_);
  tasks_.push_back(std::move(task));
  cv_.Signal();
}

void IPUDevice::WorkerLoop() {
  current_device = this;
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

}  // namespace ipuflow
