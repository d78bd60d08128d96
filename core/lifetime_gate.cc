#include "core/lifetime_gate.h"

#include <utility>

#include "core/status.h"

namespace ipuflow {

LifetimeGate::Pass& LifetimeGate::Pass::operator=(Pass&& other) {
  if (this != &other) {
    Release();
    gate_ = other.gate_;
    other.gate_ = nullptr;
  }
  return *this;
}

void LifetimeGate::Pass::Release() {
  if (gate_ != nullptr) gate_->Leave();
  gate_ = nullptr;
}

absl::StatusOr<LifetimeGate::Pass> LifetimeGate::Enter() {
  RETURN_IF_ERROR(EnterRaw());
  return Pass(this);
}

absl::Status LifetimeGate::EnterRaw() {
  MutexLock l(&mu_);
  if (!closed_.ok()) return closed_;
  ++inside_;
  return absl::OkStatus();
}

void LifetimeGate::Leave() {
  MutexLock l(&mu_);
  if (--inside_ == 0) empty_cv_.SignalAll();
}

void LifetimeGate::Close(absl::Status reason) {
  if (reason.ok()) reason = absl::CancelledError("closed");
  MutexLock l(&mu_);
  if (closed_.ok()) closed_ = std::move(reason);
}

void LifetimeGate::AwaitEmpty() {
  MutexLock l(&mu_);
  empty_cv_.Await(&mu_, [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return inside_ == 0;
  });
}

absl::Status LifetimeGate::status() const {
  MutexLock l(&mu_);
  return closed_;
}

int LifetimeGate::inside() const {
  MutexLock l(&mu_);
  return inside_;
}

}  // namespace ipuflow
