// Internal to DataLoader (feeds/data_loader.cc): the samples dataset, read
// once and kept for later epochs.
#ifndef IPUFLOW_FEEDS_SAMPLE_STORE_H_
#define IPUFLOW_FEEDS_SAMPLE_STORE_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "core/mutex.h"
#include "feeds/dataset.h"

namespace ipuflow::feeds::internal {

// The samples, read once and in order from the dataset as batches need
// them (a shuffled epoch may need the last one first), then kept.
// Thread-safe: reads are serialised by mu_.
class SampleStore {
 public:
  explicit SampleStore(DatasetPtr ds) : ds_(std::move(ds)) {}

  // The reference stays valid and unchanged as long as the store: samples
  // are only appended once Create has returned, and a deque keeps them in
  // place (so callers read them without the lock and without a copy).
  const absl::StatusOr<Element>& Get(int64_t i) {
    MutexLock l(&mu_);
    ReadUpTo(i);
    return samples_[i];
  }
  // Get(ids[0]), Get(ids[1]), ... under one lock, up to and including the
  // first sample that failed (so exactly the samples Get would read).
  void GetMany(absl::Span<const int64_t> ids,
               std::vector<const absl::StatusOr<Element>*>* out) {
    out->clear();
    MutexLock l(&mu_);
    for (int64_t i : ids) {
      ReadUpTo(i);
      out->push_back(&samples_[i]);
      if (!out->back()->ok()) return;
    }
  }
  // The sample count of a dataset of unknown cardinality, read (and kept)
  // up to `limit` + 1 samples; -1 when it has more than `limit`.
  int64_t CountUpTo(int64_t limit) {
    MutexLock l(&mu_);
    while (!ended_ && static_cast<int64_t>(samples_.size()) <= limit) {
      ReadUpTo(static_cast<int64_t>(samples_.size()));
    }
    if (!ended_) return -1;
    return static_cast<int64_t>(samples_.size()) - 1;  // The end marker.
  }
  void SetExpected(int64_t n) {
    MutexLock l(&mu_);
    expected_ = n;
    if (static_cast<int64_t>(samples_.size()) > n) samples_.resize(n);
  }

 private:
  void ReadUpTo(int64_t i) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    while (static_cast<int64_t>(samples_.size()) <= i) {
      if (!it_) it_ = ds_->MakeIterator();
      absl::StatusOr<Element> e =
          ended_ ? absl::OutOfRangeError("end") : it_->GetNext();
      if (e.status().code() == absl::StatusCode::kOutOfRange) {
        ended_ = true;
        // Not OutOfRange: that would read as the end of an epoch.
        e = absl::FailedPreconditionError(absl::StrCat(
            "DataLoader: the samples dataset ", ds_->DebugString(),
            " ended after ", read_, " samples, but it reported ", expected_));
      } else {
        ++read_;
      }
      samples_.push_back(std::move(e));
    }
  }

  const DatasetPtr ds_;
  Mutex mu_;
  std::unique_ptr<Iterator> it_ ABSL_GUARDED_BY(mu_);
  std::deque<absl::StatusOr<Element>> samples_ ABSL_GUARDED_BY(mu_);
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  int64_t read_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t expected_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ipuflow::feeds::internal

#endif  // IPUFLOW_FEEDS_SAMPLE_STORE_H_
