#include "core/cancellation.h"

#include <thread>
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
  if (callbacks_.erase(token) > 0 || !cancelled_) return;
  // The callback may be running on the cancelling thread right now: wait,
  // so that the caller can free what it touches (unless this is that
  // thread, unregistering from inside a callback).
  if (std::this_thread::get_id() == cancelling_thread_) return;
  done_cv_.Await(&mu_, [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return callbacks_done_;
  });
}

void CancellationManager::StartCancel(absl::Status reason) {
  std::vector<std::function<void()>> to_run;
  {
    MutexLock l(&mu_);
    if (cancelled_) return;
    cancelled_ = true;
    reason_ = std::move(reason);
    cancelling_thread_ = std::this_thread::get_id();
    for (auto& [token, fn] : callbacks_) to_run.push_back(std::move(fn));
    callbacks_.clear();
  }
  for (auto& fn : to_run) fn();
  MutexLock l(&mu_);
  callbacks_done_ = true;
  done_cv_.SignalAll();
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
