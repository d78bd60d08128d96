#include "core/checkpoint/manifest_reading.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/tensor_shape.h"

namespace ipuflow::checkpoint {

std::string TypeString(DType dtype, const TensorShape& shape) {
  return absl::StrCat(DTypeName(dtype), shape.DebugString());
}

TensorShape ShapeOf(const TensorEntry& e) {
  TensorShape s;
  for (int64_t d : e.shape()) s.AddDim(d);
  return s;
}

std::string EntryType(const TensorEntry& e) {
  return TypeString(static_cast<DType>(e.dtype()), ShapeOf(e));
}

std::string ProgramKey(int replica, const std::string& key) {
  return absl::StrCat("replica ", replica, "|", key);
}

const InfeedPosition* FindInfeed(const Manifest& m, const std::string& name) {
  for (const InfeedPosition& p : m.infeeds()) {
    if (p.name() == name) return &p;
  }
  return nullptr;
}

const DataLoaderPosition* FindLoader(const Manifest& m,
                                     const std::string& name) {
  for (const DataLoaderPosition& p : m.loaders()) {
    if (p.name() == name) return &p;
  }
  return nullptr;
}

std::string InfeedNames(const Manifest& m) {
  std::vector<std::string> names;
  for (const InfeedPosition& p : m.infeeds()) names.push_back(p.name());
  return names.empty() ? "none" : absl::StrJoin(names, ", ");
}

absl::StatusOr<int64_t> TotalConsumed(const InfeedPosition& p) {
  int64_t total = 0;
  for (int r = 0; r < p.consumed_size(); ++r) {
    if (p.consumed(r) < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("infeed '", p.name(), "': replica ", r, " consumed ",
                       p.consumed(r), " elements, a negative count"));
    }
    if (p.consumed(r) != p.consumed(0)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "infeed '", p.name(), "': its replicas consumed ",
          absl::StrJoin(p.consumed(), ", "),
          " elements; a checkpoint resumes only where every replica consumed "
          "the same count (the end of a run)"));
    }
    // Read from a file: a sum past int64 would become a negative position.
    if (!CheckedAdd(total, p.consumed(r), &total)) {
      return absl::InvalidArgumentError(
          absl::StrCat("infeed '", p.name(), "': its ", p.consumed_size(),
                       " replicas consumed ", p.consumed(0),
                       " elements each, more than int64 holds in all"));
    }
  }
  return total;
}

absl::StatusOr<int64_t> LoaderPosition(const DataLoaderPosition& l) {
  int64_t at = 0;
  if (l.epoch() < 0 || l.samples_per_epoch() < 1 || l.sample() < 0 ||
      l.sample() > l.samples_per_epoch() ||
      !CheckedMul(l.epoch(), l.samples_per_epoch(), &at) ||
      !CheckedAdd(at, l.sample(), &at)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "DataLoader '", l.name(), "': position epoch ", l.epoch(), " sample ",
        l.sample(), " of ", l.samples_per_epoch(),
        " samples per epoch is not a position (epoch >= 0, 0 <= sample <= "
        "samples per epoch >= 1, epoch x samples per epoch + sample within "
        "int64)"));
  }
  return at;
}

}  // namespace ipuflow::checkpoint
