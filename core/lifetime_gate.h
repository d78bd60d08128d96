// LifetimeGate: how an object that other threads call into goes away
// safely. Callers enter before they use the object and leave after; the
// owner closes the gate (later Enters fail with the reason it gives, e.g.
// Cancelled "strategy destroyed"), wakes whoever waits inside (its own
// business: cancel runs, cancel queues) and waits until everyone inside has
// left. Used by IPUStrategy, Executable and both feed queues.
//
//   absl::Status Foo::Call() {
//     ASSIGN_OR_RETURN(LifetimeGate::Pass pass, gate_.Enter());
//     ...                                   // the object stays alive
//   }                                        // ~Pass leaves
//   Foo::~Foo() {
//     gate_.Close(absl::CancelledError("foo destroyed"));
//     WakeWaiters();
//     gate_.AwaitEmpty();
//   }
//
// Thread safety: every method may be called from any thread.
#ifndef IPUFLOW_CORE_LIFETIME_GATE_H_
#define IPUFLOW_CORE_LIFETIME_GATE_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/mutex.h"

namespace ipuflow {

class LifetimeGate {
 public:
  // Proof of having entered; leaves the gate when destroyed (movable).
  class Pass {
   public:
    Pass(Pass&& other) : gate_(other.gate_) { other.gate_ = nullptr; }
    Pass& operator=(Pass&& other);
    ~Pass() { Release(); }
    // Leaves now (idempotent).
    void Release();

   private:
    friend class LifetimeGate;
    explicit Pass(LifetimeGate* gate) : gate_(gate) {}
    LifetimeGate* gate_;
  };

  LifetimeGate() = default;
  LifetimeGate(const LifetimeGate&) = delete;
  LifetimeGate& operator=(const LifetimeGate&) = delete;
  // REQUIRES: nobody inside (AwaitEmpty returned, or nobody ever entered).
  ~LifetimeGate() = default;

  // A pass, or the reason given to Close once the gate is closed.
  absl::StatusOr<Pass> Enter();
  // The same without a Pass: each successful EnterRaw needs one Leave.
  absl::Status EnterRaw();
  void Leave();

  // Later Enters fail with `reason` (the first Close's; not OK). Does not
  // wait: callers inside keep their pass.
  void Close(absl::Status reason);
  // Waits until every caller that entered has left. Callers may still
  // enter meanwhile unless the gate is closed.
  void AwaitEmpty();
  void CloseAndWait(absl::Status reason) {
    Close(std::move(reason));
    AwaitEmpty();
  }

  // OK while open; the close reason after.
  absl::Status status() const;
  bool closed() const { return !status().ok(); }
  int inside() const;  // Callers inside now (tests).

 private:
  mutable Mutex mu_;
  CondVar empty_cv_;
  int inside_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status closed_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ipuflow

#endif  // IPUFLOW_CORE_LIFETIME_GATE_H_
