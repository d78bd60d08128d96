#include "core/ipu/ipu_device.h"

#include "absl/strings/str_cat.h"

namespace ipuflow {
namespace {
thread_local IPUDevice* current_device = nullptr;
}  // namespace

IPUDevice* IPUDevice::Current() { return current_device; }

IPUDevice::IPUDevice(int id, int64_t memory_budget_bytes, int intra_op_threads)
    : id_(id),
      memory_budget_(memory_budget_bytes),
      intra_op_("ipu" + std::to_string(id) + "-intra-op", intra_op_threads) {}

absl::StatusOr<std::unique_ptr<IPUDevice>> IPUDevice::Create(
    int id, int64_t memory_budget_bytes, int intra_op_threads) {
  std::unique_ptr<IPUDevice> d(
      new IPUDevice(id, memory_budget_bytes, intra_op_threads));
  if (!d->intra_op_.status().ok()) {
    return absl::ResourceExhaustedError(absl::StrCat(
        d->name(), ": ", d->intra_op_.status().message()));
  }
  IPUDevice* self = d.get();
  absl::StatusOr<std::thread> worker =
      StartThread(d->name() + " worker", [self] { self->WorkerLoop(); });
  if (!worker.ok()) return worker.status();
  d->worker_ = *std::move(worker);
  return d;
}

IPUDevice::~IPUDevice() {
  {
    MutexLock l(&mu_);
    stopping_ = true;
    cv_.SignalAll();
  }
  if (worker_.joinable()) worker_.join();
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
