// The single-threaded transformations: Batch, Repeat, Take, Skip, Shard.
//
// An input error takes its element's position: Take, Skip and Shard drop it
// when they drop that position, and pass it on otherwise.
#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "feeds/dataset.h"
#include "feeds/dataset_internal.h"

namespace ipuflow::feeds {
namespace {

using internal::EndOfSequence;
using internal::IsEnd;
using internal::UnaryDataset;

std::string TensorType(const Tensor& t) {
  return absl::StrCat(DTypeName(t.dtype()), t.shape().DebugString());
}

// ---------------------------------------------------------------- Batch

ElementSpec BatchSpec(ElementSpec spec, int64_t batch_size, bool drop) {
  for (TensorShape& s : spec.shapes) {
    s.InsertDim(0, drop ? batch_size : kUnknownDim);
  }
  return spec;
}

// Stacks component c of every row; rows must agree in dtypes and shapes.
absl::StatusOr<Element> StackRows(const std::vector<Element>& rows,
                                  const std::string& who) {
  const Element& first = rows[0];
  for (size_t r = 1; r < rows.size(); ++r) {
    if (rows[r].size() != first.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          who, ": element ", r, " of the batch has ", rows[r].size(),
          " components but element 0 has ", first.size()));
    }
    for (size_t c = 0; c < first.size(); ++c) {
      const Tensor& t = rows[r][c];
      if (t.dtype() != first[c].dtype() || t.shape() != first[c].shape()) {
        return absl::InvalidArgumentError(absl::StrCat(
            who, ": component ", c, " of element ", r, " of the batch is ",
            TensorType(t), " but element 0's is ", TensorType(first[c]),
            "; Batch stacks equal shapes (pad or resize in a Map first)"));
      }
    }
  }
  Element out;
  std::vector<Tensor> column(rows.size());
  for (size_t c = 0; c < first.size(); ++c) {
    for (size_t r = 0; r < rows.size(); ++r) column[r] = rows[r][c];
    ASSIGN_OR_RETURN(Tensor stacked, Stack(column));
    out.push_back(std::move(stacked));
  }
  return out;
}

class BatchDataset : public UnaryDataset {
 public:
  BatchDataset(DatasetPtr input, int64_t batch_size, bool drop)
      : UnaryDataset(input, BatchSpec(input->spec(), batch_size, drop)),
        batch_size_(batch_size),
        drop_(drop) {}
  int64_t Cardinality() const override {
    const int64_t c = input()->Cardinality();
    if (c < 0) return c;
    return drop_ ? c / batch_size_ : (c + batch_size_ - 1) / batch_size_;
  }
  std::string DebugString() const override {
    return Chain(
        absl::StrCat("Batch(", batch_size_, drop_ ? ", drop_remainder)" : ")"));
  }
  std::unique_ptr<Iterator> MakeIterator(
      const IteratorContext& ctx) const override;

 private:
  class BatchIterator;
  int64_t batch_size_;
  bool drop_;
};

class BatchDataset::BatchIterator : public Iterator {
 public:
  BatchIterator(std::shared_ptr<const BatchDataset> ds,
                std::unique_ptr<Iterator> input)
      : ds_(std::move(ds)), input_(std::move(input)) {}

  absl::StatusOr<Element> GetNext() override {
    if (!input_) return EndOfSequence();
    std::vector<Element> rows;
    while (static_cast<int64_t>(rows.size()) < ds_->batch_size_) {
      absl::StatusOr<Element> e = input_->GetNext();
      if (IsEnd(e.status())) {
        input_.reset();
        break;
      }
      if (!e.ok()) return e.status();  // The partial batch is dropped.
      rows.push_back(*std::move(e));
    }
    const bool full = static_cast<int64_t>(rows.size()) == ds_->batch_size_;
    if (rows.empty() || (ds_->drop_ && !full)) return EndOfSequence();
    return StackRows(rows, ds_->DebugString());
  }

 private:
  std::shared_ptr<const BatchDataset> ds_;
  std::unique_ptr<Iterator> input_;  // Null once the input has ended.
};

std::unique_ptr<Iterator> BatchDataset::MakeIterator(
    const IteratorContext& ctx) const {
  return std::make_unique<BatchIterator>(self<BatchDataset>(),
                                         input()->MakeIterator(ctx));
}

// ---------------------------------------------------------------- Repeat

class RepeatDataset : public UnaryDataset {
 public:
  RepeatDataset(DatasetPtr input, int64_t count)
      : UnaryDataset(input, input->spec()), count_(count) {}
  bool RepeatsForever() const override {
    return count_ < 0 || input()->RepeatsForever();
  }
  const Dataset* ordered_input() const override { return input().get(); }
  int64_t Cardinality() const override {
    const int64_t c = input()->Cardinality();
    if (count_ == 0 || c == 0) return 0;
    if (count_ < 0) return c == kUnknownCardinality ? c : kInfiniteCardinality;
    return c < 0 ? c : c * count_;
  }
  std::string DebugString() const override {
    return Chain(count_ < 0 ? "Repeat()"
                            : absl::StrCat("Repeat(", count_, ")"));
  }
  std::unique_ptr<Iterator> MakeIterator(
      const IteratorContext& ctx) const override;

 private:
  class RepeatIterator;
  int64_t count_;
};

// Invariant: input_ is the iterator of pass `pass_`, or null between passes.
class RepeatDataset::RepeatIterator : public Iterator {
 public:
  RepeatIterator(std::shared_ptr<const RepeatDataset> ds, IteratorContext ctx)
      : ds_(std::move(ds)), ctx_(ctx) {}

  absl::StatusOr<Element> GetNext() override {
    while (!done_) {
      if (!input_) {
        if (ds_->count_ >= 0 && pass_ >= ds_->count_) break;
        // Pass 0 keeps the outer epoch, so Repeat(1) iterates like its input.
        IteratorContext ctx = ctx_;
        if (pass_ > 0) ctx.epoch = internal::Mix(ctx_.epoch, pass_);
        input_ = ds_->input()->MakeIterator(ctx);
        yielded_ = false;
      }
      absl::StatusOr<Element> e = input_->GetNext();
      if (!IsEnd(e.status())) {
        yielded_ = true;
        return e;
      }
      input_.reset();
      ++pass_;
      if (!yielded_) break;  // An empty pass: the input has nothing to repeat.
    }
    done_ = true;
    return EndOfSequence();
  }

 private:
  std::shared_ptr<const RepeatDataset> ds_;
  const IteratorContext ctx_;
  std::unique_ptr<Iterator> input_;
  int64_t pass_ = 0;
  bool yielded_ = false;
  bool done_ = false;
};

std::unique_ptr<Iterator> RepeatDataset::MakeIterator(
    const IteratorContext& ctx) const {
  return std::make_unique<RepeatIterator>(self<RepeatDataset>(), ctx);
}

// ------------------------------------------------------ Take, Skip, Shard

// Yields the input's elements at positions p with keep(p) until stop(p).
// Take, Skip and Shard are this with different predicates.
class FilterByPositionDataset : public UnaryDataset {
 public:
  enum Kind { kTake, kSkip, kShard };
  FilterByPositionDataset(DatasetPtr input, Kind kind, int64_t a, int64_t b)
      : UnaryDataset(input, input->spec()), kind_(kind), a_(a), b_(b) {}

  bool RepeatsForever() const override {
    return !(kind_ == kTake && a_ >= 0) && input()->RepeatsForever();
  }
  // A Take yields a prefix of its input; Skip and Shard drop elements.
  const Dataset* ordered_input() const override {
    return kind_ == kTake ? input().get() : nullptr;
  }
  int64_t CardinalityBound() const override {
    const int64_t c = Cardinality();
    if (c >= 0) return c;
    const int64_t bound = input()->CardinalityBound();  // Skip, Shard drop.
    if (kind_ == kTake && a_ >= 0) return bound >= 0 ? std::min(bound, a_) : a_;
    return bound;
  }
  int64_t Cardinality() const override {
    const int64_t c = input()->Cardinality();
    switch (kind_) {
      case kTake:
        if (a_ < 0) return c;
        if (c == kInfiniteCardinality) return a_;
        return c < 0 ? c : std::min(c, a_);
      case kSkip:
        if (c < 0) return c;
        return a_ < 0 ? 0 : std::max<int64_t>(0, c - a_);
      case kShard:
        if (c < 0) return c;
        return c / a_ + (b_ < c % a_ ? 1 : 0);
    }
    return kUnknownCardinality;
  }
  std::string DebugString() const override {
    switch (kind_) {
      case kTake:
        return Chain(absl::StrCat("Take(", a_, ")"));
      case kSkip:
        return Chain(absl::StrCat("Skip(", a_, ")"));
      case kShard:
        return Chain(absl::StrCat("Shard(", a_, ", ", b_, ")"));
    }
    return "?";
  }
  std::unique_ptr<Iterator> MakeIterator(
      const IteratorContext& ctx) const override;

  // Whether position p is yielded, and whether no position >= p is.
  bool Keep(int64_t p) const {
    switch (kind_) {
      case kTake:
        return true;
      case kSkip:
        return a_ >= 0 && p >= a_;
      case kShard:
        return p % a_ == b_;
    }
    return false;
  }
  bool Stop(int64_t p) const { return kind_ == kTake && a_ >= 0 && p >= a_; }

 private:
  Kind kind_;
  int64_t a_, b_;  // Take/Skip: count. Shard: num_shards, index.
};

class FilterByPositionIterator : public Iterator {
 public:
  FilterByPositionIterator(std::shared_ptr<const FilterByPositionDataset> ds,
                           std::unique_ptr<Iterator> input)
      : ds_(std::move(ds)), input_(std::move(input)) {}

  absl::StatusOr<Element> GetNext() override {
    while (input_) {
      if (ds_->Stop(position_)) break;
      absl::StatusOr<Element> e = input_->GetNext();
      if (IsEnd(e.status())) break;
      if (ds_->Keep(position_++)) return e;
    }
    input_.reset();  // Releases the input's threads and buffers early.
    return EndOfSequence();
  }

 private:
  std::shared_ptr<const FilterByPositionDataset> ds_;
  std::unique_ptr<Iterator> input_;
  int64_t position_ = 0;
};

std::unique_ptr<Iterator> FilterByPositionDataset::MakeIterator(
    const IteratorContext& ctx) const {
  return std::make_unique<FilterByPositionIterator>(
      self<FilterByPositionDataset>(), input()->MakeIterator(ctx));
}

}  // namespace

// ------------------------------------------------- Dataset's methods

namespace {
DatasetPtr Invalid(const Dataset& ds, const std::string& call,
                   const std::string& why) {
  return ErrorDataset(absl::InvalidArgumentError(
      absl::StrCat(ds.DebugString(), ".", call, ": ", why)));
}
}  // namespace

DatasetPtr Dataset::Batch(int64_t batch_size, bool drop_remainder) const {
  if (!ok()) return shared_from_this();
  if (batch_size < 1) {
    return Invalid(*this, absl::StrCat("Batch(", batch_size, ")"),
                   "batch_size must be >= 1");
  }
  absl::Status bounded = internal::CheckBufferSize(
      *this, absl::StrCat("Batch(", batch_size, ")"), batch_size);
  if (!bounded.ok()) return ErrorDataset(bounded);
  return std::make_shared<BatchDataset>(shared_from_this(), batch_size,
                                        drop_remainder);
}

DatasetPtr Dataset::Repeat(int64_t count) const {
  if (!ok()) return shared_from_this();
  if (count < -1) {
    return Invalid(*this, absl::StrCat("Repeat(", count, ")"),
                   "count must be >= 0, or -1 to repeat forever");
  }
  return std::make_shared<RepeatDataset>(shared_from_this(), count);
}

DatasetPtr Dataset::Take(int64_t count) const {
  if (!ok()) return shared_from_this();
  if (count < -1) {
    return Invalid(*this, absl::StrCat("Take(", count, ")"),
                   "count must be >= 0, or -1 for all");
  }
  return std::make_shared<FilterByPositionDataset>(
      shared_from_this(), FilterByPositionDataset::kTake, count, 0);
}

DatasetPtr Dataset::Skip(int64_t count) const {
  if (!ok()) return shared_from_this();
  const std::string call = absl::StrCat("Skip(", count, ")");
  if (count < -1) {
    return Invalid(*this, call, "count must be >= 0, or -1 to skip all");
  }
  if (count == -1 && Cardinality() == kInfiniteCardinality) {
    return Invalid(*this, call,
                   "skipping all of an infinite dataset would never end");
  }
  return std::make_shared<FilterByPositionDataset>(
      shared_from_this(), FilterByPositionDataset::kSkip, count, 0);
}

DatasetPtr Dataset::Shard(int64_t num_shards, int64_t index) const {
  if (!ok()) return shared_from_this();
  const std::string call = absl::StrCat("Shard(", num_shards, ", ", index, ")");
  if (num_shards < 1) {
    return Invalid(*this, call,
                   absl::StrCat("num_shards must be >= 1, got ", num_shards));
  }
  if (index < 0 || index >= num_shards) {
    return Invalid(*this, call,
                   absl::StrCat("index ", index, " is out of range [0, ",
                                num_shards, ") for num_shards ", num_shards));
  }
  return std::make_shared<FilterByPositionDataset>(
      shared_from_this(), FilterByPositionDataset::kShard, num_shards, index);
}

}  // namespace ipuflow::feeds
