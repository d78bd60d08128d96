// Dataset::Shuffle: a buffer of up to buffer_size elements; each GetNext
// tops the buffer up from the input, then removes a uniformly chosen one.
// With buffer_size >= the input's size this is a uniform permutation; with a
// smaller buffer, elements move at most about buffer_size places early.
//
// The generator is mt19937_64 (fully specified by the standard, so orders
// are the same on every platform) seeded from (seed, epoch): a new
// MakeIterator() replays the same order, and each pass of an outer Repeat
// gets a different one.
#include <random>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "feeds/dataset.h"
#include "feeds/dataset_internal.h"

namespace ipuflow::feeds {
namespace {

using internal::EndOfSequence;
using internal::IsEnd;

class ShuffleDataset : public internal::UnaryDataset {
 public:
  ShuffleDataset(DatasetPtr input, int64_t buffer_size, uint64_t seed)
      : UnaryDataset(input, input->spec()),
        buffer_size_(buffer_size),
        seed_(seed) {}
  int64_t Cardinality() const override { return input()->Cardinality(); }
  std::string DebugString() const override {
    return Chain(absl::StrCat("Shuffle(", buffer_size_, ", seed=", seed_, ")"));
  }
  std::unique_ptr<Iterator> MakeIterator(
      const IteratorContext& ctx) const override;

 private:
  class ShuffleIterator;
  int64_t buffer_size_;
  uint64_t seed_;
};

class ShuffleDataset::ShuffleIterator : public Iterator {
 public:
  ShuffleIterator(std::shared_ptr<const ShuffleDataset> ds,
                  std::unique_ptr<Iterator> input, uint64_t seed)
      : ds_(std::move(ds)), input_(std::move(input)), rng_(seed) {}

  absl::StatusOr<Element> GetNext() override {
    while (input_ && static_cast<int64_t>(buffer_.size()) < ds_->buffer_size_) {
      absl::StatusOr<Element> e = input_->GetNext();
      if (IsEnd(e.status())) {
        input_.reset();
        break;
      }
      if (!e.ok()) return e.status();
      buffer_.push_back(*std::move(e));
    }
    if (buffer_.empty()) return EndOfSequence();
    // The modulo bias is below buffer_size / 2^64: negligible.
    const size_t i = rng_() % buffer_.size();
    std::swap(buffer_[i], buffer_.back());
    Element out = std::move(buffer_.back());
    buffer_.pop_back();
    return out;
  }

 private:
  std::shared_ptr<const ShuffleDataset> ds_;
  std::unique_ptr<Iterator> input_;  // Null once the input has ended.
  std::vector<Element> buffer_;
  std::mt19937_64 rng_;
};

std::unique_ptr<Iterator> ShuffleDataset::MakeIterator(
    const IteratorContext& ctx) const {
  return std::make_unique<ShuffleIterator>(self<ShuffleDataset>(),
                                           input()->MakeIterator(ctx),
                                           internal::Mix(seed_, ctx.epoch));
}

}  // namespace

DatasetPtr Dataset::Shuffle(int64_t buffer_size, uint64_t seed) const {
  if (!ok()) return shared_from_this();
  if (buffer_size < 1) {
    return ErrorDataset(absl::InvalidArgumentError(absl::StrCat(
        DebugString(), ".Shuffle(", buffer_size,
        "): buffer_size must be >= 1 (1 keeps the order; the dataset's size "
        "gives a uniform shuffle)")));
  }
  absl::Status bounded = internal::CheckBufferSize(
      *this, absl::StrCat("Shuffle(", buffer_size, ")"), buffer_size);
  if (!bounded.ok()) return ErrorDataset(bounded);
  return std::make_shared<ShuffleDataset>(shared_from_this(), buffer_size,
                                          seed);
}

}  // namespace ipuflow::feeds
