#include "core/checkpoint/manifest_reading.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

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
    if (p.consumed(r) != p.consumed(0) || p.consumed(r) < 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "infeed '", p.name(), "': its replicas consumed ",
          absl::StrJoin(p.consumed(), ", "),
          " elements; a checkpoint resumes only where every replica consumed "
          "the same count (the end of a run)"));
    }
    total += p.consumed(r);
  }
  return total;
}

}  // namespace ipuflow::checkpoint
