// What an outfeed hands the host: named tensors (OutfeedResult), one step
// of them (OutfeedElement) or every step stacked (IPUOutfeedQueue::Dequeue).
#ifndef IPUFLOW_FEEDS_OUTFEED_RESULT_H_
#define IPUFLOW_FEEDS_OUTFEED_RESULT_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/tensor.h"

namespace ipuflow::feeds {

// Named tensors; a list enqueue gets the names "0", "1", ...
struct OutfeedResult {
  std::vector<std::string> names;
  std::vector<Tensor> tensors;
  // NotFound naming the name (or index) and the names there are.
  absl::StatusOr<Tensor> at(const std::string& name) const;
  absl::StatusOr<Tensor> at(size_t index) const;
  // Convenience: the tensor, or an invalid Tensor (dtype kInvalid, shape
  // []) for an unknown name; never aborts. Prefer at() to learn why.
  const Tensor& operator[](const std::string& name) const;
  size_t size() const { return tensors.size(); }
};
// One step: each tensor has a leading replica dimension when R > 1.
using OutfeedElement = OutfeedResult;

namespace internal {
// "'loss', 'accuracy'" (or "none"): names in an error message.
std::string NameList(const std::vector<std::string>& names);
}  // namespace internal

}  // namespace ipuflow::feeds

#endif  // IPUFLOW_FEEDS_OUTFEED_RESULT_H_
