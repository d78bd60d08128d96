#include "core/cancellation.h"

#include <vector>

namespace ipuflow {

int CancellationManager::Register(std::function<void()> fn) {
  {
    MutexLock l(&mu_);
    if (!cancelled_) {
      const int token = next_token_++;
      callbacks_[token] = std::move(fn);
      return token;
    }
  }
  fn();
  return -1;
}

void CancellationManager::Unregister(int token) {
  MutexLock l(&mu_);
  callbacks_.erase(token);
}

void CancellationManager::StartCancel(absl::Status reason) {
  std::vector<std::function<void()>> to_run;
  {
    MutexLock l(&mu_);
    if (cancelled_) return;
    cancelled_ = true;
    reason_ = std::move(reason);
    for (auto& [token, fn] : callbacks_) to_run.push_back(std::move(fn));
    callbacks_.clear();
  }
  for (auto& fn : to_run) fn();
}

bool CancellationManager::cancelled() const {
  MutexLock l(&mu_);
  return cancelled_;
}

absl::Status CancellationManager::reason() const {
  MutexLock l(&mu_);
  return reason_;
}

}  // namespace ipuflow
