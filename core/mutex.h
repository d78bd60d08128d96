// Mutex, MutexLock and CondVar: thin, annotated wrappers over std::mutex.
//
// Why not absl::Mutex: Debian ships Abseil as uninstrumented shared
// libraries, so ThreadSanitizer cannot see absl::Mutex's happens-before edges
// and reports false races. std::mutex goes through pthread, which TSAN
// intercepts. The wrappers keep Abseil's thread-safety annotations, so
// `ABSL_GUARDED_BY(mu_)` is still checked by clang.
//
//   Mutex mu_;
//   int count_ ABSL_GUARDED_BY(mu_);
//   { MutexLock l(&mu_); ++count_; cv_.SignalAll(); }
//
// Thread safety: all members are safe to call from any thread.
#ifndef IPUFLOW_CORE_MUTEX_H_
#define IPUFLOW_CORE_MUTEX_H_

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "absl/base/thread_annotations.h"

namespace ipuflow {

class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }

 private:
  friend class CondVar;
  std::mutex mu_;
};

class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) {
    mu_->Lock();
  }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

// A condition variable bound to a Mutex. Wait() must be called with the mutex
// held; it is released while waiting and re-acquired before returning.
class CondVar {
 public:
  void Wait(Mutex* mu) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();
  }
  // Waits until `pred()` holds. `pred` runs with the mutex held.
  template <typename Pred>
  void Await(Mutex* mu, Pred pred) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    cv_.wait(lock, pred);
    lock.release();
  }
  // Returns false on timeout.
  template <typename Pred>
  bool AwaitWithTimeout(Mutex* mu, std::chrono::nanoseconds timeout, Pred pred)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    bool ok = cv_.wait_for(lock, timeout, pred);
    lock.release();
    return ok;
  }
  void Signal() { cv_.notify_one(); }
  void SignalAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

// A one-shot event: Notify() once, WaitForNotification() from any thread.
class Notification {
 public:
  void Notify() {
    MutexLock l(&mu_);
    notified_ = true;
    cv_.SignalAll();
  }
  void WaitForNotification() {
    MutexLock l(&mu_);
    cv_.Await(&mu_,
              [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return notified_; });
  }
  bool HasBeenNotified() {
    MutexLock l(&mu_);
    return notified_;
  }

 private:
  Mutex mu_;
  CondVar cv_;
  bool notified_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace ipuflow

#endif  // IPUFLOW_CORE_MUTEX_H_
