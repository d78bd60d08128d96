// StageFifo: the bounded FIFO between two pipeline work items: activations
// from a forward stage to the next, gradients from a backward stage to the
// previous one, and a stage's activation stash (forward -> its backward).
// Each message carries the virtual time at which its producer finished
// (pipeline_report.h), so the consumer's virtual clock honours the
// dependency.
//
//   StageFifo fifo("stage 0 -> 1", /*capacity=*/2);
//   RETURN_IF_ERROR(fifo.Push({values, vend}));   // producer IPU's thread
//   ASSIGN_OR_RETURN(StageFifo::Message m, fifo.Pop());   // consumer's
//
// Why bounded and why it cannot deadlock: every IPU runs its items in a
// fixed order, so the pipeline is a Kahn process network; with blocking
// reads and writes its behaviour does not depend on timing. The runtime
// sizes each FIFO to the peak occupancy of one valid execution (the schedule
// table run step by step), so that execution never blocks a writer, and
// hence no execution does.
//
// Thread safety: one producer and one consumer thread (or the same thread
// for a stash); Cancel from any thread wakes both with the given status.
#ifndef IPUFLOW_PIPELINING_FIFO_H_
#define IPUFLOW_PIPELINING_FIFO_H_

#include <deque>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/mutex.h"
#include "core/tensor.h"

namespace ipuflow::pipelining {

class StageFifo {
 public:
  struct Message {
    std::vector<Tensor> values;
    double virtual_time = 0;  // Producer's virtual end time, seconds.
  };

  StageFifo(std::string name, int capacity)
      : name_(std::move(name)), capacity_(capacity) {}

  const std::string& name() const { return name_; }
  int capacity() const { return capacity_; }

  // Blocks while full. The status given to Cancel once cancelled.
  absl::Status Push(Message m) {
    MutexLock l(&mu_);
    cv_.Await(&mu_, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return !status_.ok() || static_cast<int>(q_.size()) < capacity_;
    });
    if (!status_.ok()) return status_;
    q_.push_back(std::move(m));
    peak_ = std::max(peak_, static_cast<int>(q_.size()));
    cv_.SignalAll();
    return absl::OkStatus();
  }

  // Blocks while empty.
  absl::StatusOr<Message> Pop() {
    MutexLock l(&mu_);
    cv_.Await(&mu_, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return !status_.ok() || !q_.empty();
    });
    if (!status_.ok()) return status_;
    Message m = std::move(q_.front());
    q_.pop_front();
    cv_.SignalAll();
    return m;
  }

  void Cancel(const absl::Status& reason) {
    MutexLock l(&mu_);
    if (status_.ok()) status_ = reason;
    cv_.SignalAll();
  }

  // Empties the FIFO and clears a cancellation and the peak (between runs).
  void Reset() {
    MutexLock l(&mu_);
    q_.clear();
    status_ = absl::OkStatus();
    peak_ = 0;
  }

  int size() const {
    MutexLock l(&mu_);
    return static_cast<int>(q_.size());
  }
  // Most messages held at once since the last Reset.
  int peak() const {
    MutexLock l(&mu_);
    return peak_;
  }

 private:
  const std::string name_;
  const int capacity_;
  mutable Mutex mu_;
  CondVar cv_;
  std::deque<Message> q_ ABSL_GUARDED_BY(mu_);
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  int peak_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ipuflow::pipelining

#endif  // IPUFLOW_PIPELINING_FIFO_H_
