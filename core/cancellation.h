// CancellationManager: how a run in progress is stopped from another
// thread. Code that blocks (a feed dequeue, a collective) registers a
// callback that wakes it; StartCancel() runs every callback once and makes
// later registrations run immediately.
//
//   int token = cm->Register([&ring] { ring.Cancel(absl::CancelledError()); });
//   absl::StatusOr<Tensor> t = ring.Pop();   // woken by StartCancel
//   cm->Unregister(token);
//
// Thread safety: all methods may be called from any thread. Callbacks run
// on the thread calling StartCancel (or Register, if already cancelled),
// without the manager's lock held. Unregister returns only once the
// callback cannot run any more: if StartCancel is running it, Unregister
// waits for it (except when called from a callback), so the caller may then
// free what the callback touches.
#ifndef IPUFLOW_CORE_CANCELLATION_H_
#define IPUFLOW_CORE_CANCELLATION_H_

#include <functional>
#include <map>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "core/mutex.h"

namespace ipuflow {

class CancellationManager {
 public:
  // Returns a token for Unregister. Runs `fn` at once if already cancelled.
  int Register(std::function<void()> fn);
  // Removes the callback; waits for it if StartCancel is running it.
  void Unregister(int token);
  void StartCancel(absl::Status reason);
  bool cancelled() const;
  absl::Status reason() const;

 private:
  mutable Mutex mu_;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status reason_ ABSL_GUARDED_BY(mu_);
  int next_token_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<int, std::function<void()>> callbacks_ ABSL_GUARDED_BY(mu_);
  // Set once StartCancel has run every callback.
  bool callbacks_done_ ABSL_GUARDED_BY(mu_) = false;
  std::thread::id cancelling_thread_ ABSL_GUARDED_BY(mu_);
  CondVar done_cv_;
};

}  // namespace ipuflow

#endif  // IPUFLOW_CORE_CANCELLATION_H_
