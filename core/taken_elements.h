// TakenElements: the infeed elements a device-loop iteration has taken so
// far, so that an iteration that does not complete (a cancel, a reset, a
// kernel error) gives them back and the stream continues exactly where the
// stopped run left it, as a pipeline does with the elements its feeder took
// ahead of its stages (TensorFlow IPU guide 6.5 keeps the infeed position
// across runs; docs/RELIABILITY.md "Feeds").
//
// The loop kernel (ops/control/loop_ops.cc) opens one per loop and hands it
// to its body through RunEnv::taken; InfeedDequeue records each element it
// delivers there. After an iteration completes, its elements are committed:
// handed to the enclosing loop's record (a nested loop is one iteration of
// the outer one) or forgotten. After an iteration stopped by a cancel (a
// Cancelled status: Cancel, a reset or reconfigure, another replica's
// failure) they are given back, newest first, so the source sees them in
// their original order. After a kernel error of the iteration itself they
// count as used, as a pipeline's failing micro-batch does: a poisoned
// element would otherwise stop every later run.
//
// Thread safety: one per loop kernel call, used by the thread running it.
#ifndef IPUFLOW_CORE_TAKEN_ELEMENTS_H_
#define IPUFLOW_CORE_TAKEN_ELEMENTS_H_

#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "core/tensor.h"

namespace ipuflow {

// Where a taken element goes back to (an infeed's device side).
class ElementSource {
 public:
  virtual ~ElementSource() = default;
  // Puts `element`, taken for `replica` of `num_replicas`, back at the
  // front of that replica's stream. Errors (the source was destroyed) are
  // ignored by the caller: the stream they would continue is gone.
  virtual absl::Status ReturnElement(int replica, int num_replicas,
                                     std::vector<Tensor> element) = 0;
};

class TakenElements {
 public:
  // `parent`: the enclosing loop's record, or null.
  explicit TakenElements(TakenElements* parent) : parent_(parent) {}
  ~TakenElements() { GiveBack(); }
  TakenElements(const TakenElements&) = delete;
  TakenElements& operator=(const TakenElements&) = delete;

  void Record(std::shared_ptr<ElementSource> source, int replica,
              int num_replicas, std::vector<Tensor> element) {
    taken_.push_back(
        {std::move(source), replica, num_replicas, std::move(element)});
  }
  // The iteration completed: its elements are the parent's (or consumed).
  void Commit() {
    if (parent_ != nullptr) {
      for (Taken& t : taken_) parent_->taken_.push_back(std::move(t));
    }
    taken_.clear();
  }
  // The iteration failed on its own: its elements count as used.
  void Forget() { taken_.clear(); }
  // The iteration did not complete: every element back, newest first.
  void GiveBack() {
    for (auto it = taken_.rbegin(); it != taken_.rend(); ++it) {
      it->source
          ->ReturnElement(it->replica, it->num_replicas, std::move(it->element))
          .IgnoreError();
    }
    taken_.clear();
  }
  int64_t size() const { return static_cast<int64_t>(taken_.size()); }

 private:
  struct Taken {
    std::shared_ptr<ElementSource> source;
    int replica;
    int num_replicas;
    std::vector<Tensor> element;
  };
  TakenElements* const parent_;
  std::vector<Taken> taken_;  // Capacity kept across iterations.
};

}  // namespace ipuflow

#endif  // IPUFLOW_CORE_TAKEN_ELEMENTS_H_
