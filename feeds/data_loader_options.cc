#include "feeds/data_loader_options.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace ipuflow::feeds {

std::string DataLoaderModeName(DataLoaderMode mode) {
  switch (mode) {
    case DataLoaderMode::kSync:
      return "kSync";
    case DataLoaderMode::kAsync:
      return "kAsync";
    case DataLoaderMode::kAsyncRebatched:
      return "kAsyncRebatched";
  }
  return "unknown";
}

absl::Status CheckProcessesAgree(absl::Span<const DataLoaderPlanKey> keys) {
  if (keys.empty()) {
    return absl::InvalidArgumentError(
        "DataLoader: CheckProcessesAgree got no keys (one per process)");
  }
  if (static_cast<int64_t>(keys.size()) != keys[0].process_count) {
    return absl::InvalidArgumentError(
        absl::StrCat("DataLoader: CheckProcessesAgree got ", keys.size(),
                     " keys, but process 0 has process_count(",
                     keys[0].process_count, "): pass one key per process"));
  }
  const DataLoaderPlanKey& k0 = keys[0];
  for (size_t i = 1; i < keys.size(); ++i) {
    const DataLoaderPlanKey& k = keys[i];
    const std::pair<const char*, std::pair<uint64_t, uint64_t>> fields[] = {
        {"the dataset length (samples)", {k0.num_samples, k.num_samples}},
        {"the seed", {k0.seed, k.seed}},
        {"shuffle", {k0.shuffle, k.shuffle}},
        {"drop_last", {k0.drop_last, k.drop_last}},
        {"the combined batch size",
         {k0.combined_batch_size, k.combined_batch_size}},
        {"process_count", {k0.process_count, k.process_count}}};
    for (const auto& [name, values] : fields) {
      if (values.first == values.second) continue;
      return absl::InvalidArgumentError(absl::StrCat(
          "DataLoader: processes disagree on ", name, ": process 0 has ",
          values.first, ", process ", i, " has ", values.second,
          ". Every process must read the same dataset with the same seed "
          "and settings: each takes a contiguous block of one global order, "
          "so a difference uses some samples twice and others never"));
    }
  }
  return absl::OkStatus();
}

}  // namespace ipuflow::feeds
