#include "feeds/outfeed_result.h"

#include "absl/strings/str_cat.h"

namespace ipuflow::feeds {

namespace internal {
std::string NameList(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names)
    absl::StrAppend(&out, out.empty() ? "" : ", ", "'", n, "'");
  return out.empty() ? "none" : out;
}
}  // namespace internal

using internal::NameList;

absl::StatusOr<Tensor> OutfeedResult::at(const std::string& name) const {
  for (size_t i = 0; i < names.size() && i < tensors.size(); ++i) {
    if (names[i] == name) return tensors[i];
  }
  return absl::NotFoundError(absl::StrCat("outfeed result has no tensor '",
                                          name, "'; it has ", NameList(names)));
}

absl::StatusOr<Tensor> OutfeedResult::at(size_t index) const {
  if (index < tensors.size()) return tensors[index];
  return absl::NotFoundError(absl::StrCat("outfeed result has no tensor ",
                                          index, "; it has ", tensors.size(),
                                          " (", NameList(names), ")"));
}

const Tensor& OutfeedResult::operator[](const std::string& name) const {
  for (size_t i = 0; i < names.size() && i < tensors.size(); ++i) {
    if (names[i] == name) return tensors[i];
  }
  static const Tensor* const kInvalid = new Tensor();
  return *kInvalid;
}

}  // namespace ipuflow::feeds
