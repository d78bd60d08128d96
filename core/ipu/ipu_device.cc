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
      intra_op_("ipu" + std::to_string(id) + "-intra-op", intra_op_threads),
      worker_("IPU " + std::to_string(id) + " worker", 1) {}

absl::StatusOr<std::unique_ptr<IPUDevice>> IPUDevice::Create(
    int id, int64_t memory_budget_bytes, int intra_op_threads) {
  std::unique_ptr<IPUDevice> d(
      new IPUDevice(id, memory_budget_bytes, intra_op_threads));
  if (!d->intra_op_.status().ok()) {
    return absl::ResourceExhaustedError(
        absl::StrCat(d->name(), ": ", d->intra_op_.status().message()));
  }
  if (!d->worker_.status().ok()) {
    return absl::ResourceExhaustedError(
        absl::StrCat(d->name(), ": ", d->worker_.status().message()));
  }
  return d;
}

IPUDevice::~IPUDevice() = default;

void IPUDevice::Submit(std::function<void()> task) {
  worker_.Schedule([this, task = std::move(task)] {
    current_device = this;
    task();
  });
}

}  // namespace ipuflow
