#include "feeds/data_loader_options.h"

#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/status.h"

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

absl::Status AgreeAcrossProcesses(const DataLoaderPlanKey& mine,
                                  int64_t process_index, ProcessLink& link) {
  if (mine.process_count != link.process_count() ||
      process_index != link.process_index()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "DataLoader: process_index ", process_index, " and process_count ",
        mine.process_count, " of its options, but this is process ",
        link.process_index(), " of ", link.process_count()));
  }
  const std::string text = absl::StrCat(
      mine.num_samples, " ", mine.seed, " ", mine.shuffle, " ", mine.drop_last,
      " ", mine.combined_batch_size, " ", mine.process_count);
  ASSIGN_OR_RETURN(const std::vector<std::string> all,
                   link.AllGatherStrings(/*tag=*/0xDA7A, text));
  std::vector<DataLoaderPlanKey> keys(all.size());
  for (size_t p = 0; p < all.size(); ++p) {
    const std::vector<std::string> f = absl::StrSplit(all[p], ' ');
    DataLoaderPlanKey& k = keys[p];
    int shuffle = 0, drop_last = 0;
    if (f.size() != 6 || !absl::SimpleAtoi(f[0], &k.num_samples) ||
        !absl::SimpleAtoi(f[1], &k.seed) || !absl::SimpleAtoi(f[2], &shuffle) ||
        !absl::SimpleAtoi(f[3], &drop_last) ||
        !absl::SimpleAtoi(f[4], &k.combined_batch_size) ||
        !absl::SimpleAtoi(f[5], &k.process_count)) {
      return absl::InternalError(absl::StrCat(
          "DataLoader: process ", p, "'s plan key '", all[p], "' unreadable"));
    }
    k.shuffle = shuffle != 0;
    k.drop_last = drop_last != 0;
  }
  return CheckProcessesAgree(keys);
}

}  // namespace ipuflow::feeds
