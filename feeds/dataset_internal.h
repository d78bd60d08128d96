// Helpers shared by the Dataset implementations (dataset*.cc, *_dataset.cc).
// Not part of the public API.
//
// Thread safety: stateless functions; UnaryDataset is immutable like every
// Dataset.
#ifndef IPUFLOW_FEEDS_DATASET_INTERNAL_H_
#define IPUFLOW_FEEDS_DATASET_INTERNAL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "feeds/dataset.h"

namespace ipuflow::feeds::internal {

// The most elements a dataset may hold at once (a batch, a shuffle or
// prefetch buffer): a bigger size would grow until the process is killed
// (Batch(1e12)), so it is refused when the dataset is made.
inline constexpr int64_t kMaxBufferedElements = int64_t{1} << 24;

// OK, or InvalidArgument naming the call and the limit when `n` elements
// of `ds` exceed kMaxBufferedElements or, when the element size is known,
// the machine's physical memory.
absl::Status CheckBufferSize(const Dataset& ds, const std::string& call,
                             int64_t n);

// What GetNext returns at the end of a dataset.
inline absl::Status EndOfSequence() {
  return absl::OutOfRangeError("end of dataset");
}
inline bool IsEnd(const absl::Status& s) {
  return s.code() == absl::StatusCode::kOutOfRange;
}

// splitmix64 finaliser of (a, b): a well-mixed 64-bit value for seeds.
inline uint64_t Mix(uint64_t a, uint64_t b) {
  uint64_t z = a * 0x9E3779B97F4A7C15ULL + b + 0x632BE59BD9B4E019ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// A dataset over one input dataset.
class UnaryDataset : public Dataset {
 protected:
  UnaryDataset(DatasetPtr input, ElementSpec spec)
      : Dataset(std::move(spec)), input_(std::move(input)) {}

  const DatasetPtr& input() const { return input_; }
  bool RepeatsForever() const override { return input_->RepeatsForever(); }
  // "<input chain>.<call>".
  std::string Chain(const std::string& call) const {
    return input_->DebugString() + "." + call;
  }
  // This dataset as its concrete type, for iterators that keep it alive.
  template <typename D>
  std::shared_ptr<const D> self() const {
    return std::static_pointer_cast<const D>(shared_from_this());
  }

 private:
  DatasetPtr input_;
};

}  // namespace ipuflow::feeds::internal

#endif  // IPUFLOW_FEEDS_DATASET_INTERNAL_H_
