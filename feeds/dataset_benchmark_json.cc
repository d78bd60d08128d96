#include "feeds/dataset_benchmark_json.h"

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "google/protobuf/util/json_util.h"

namespace ipuflow::feeds {

absl::StatusOr<DatasetBenchmarkResult> ParseDatasetBenchmarkJson(
    absl::string_view json) {
  // protobuf's JSON parser recurses per nesting level; 1 MiB is far more
  // than any run's result and bounds the work.
  constexpr size_t kMaxJsonBytes = 1 << 20;
  if (json.size() > kMaxJsonBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("dataset benchmark JSON has ", json.size(),
                     " bytes; the limit is ", kMaxJsonBytes));
  }
  DatasetBenchmarkResult result;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  const auto status = google::protobuf::util::JsonStringToMessage(
      std::string(json), &result, options);
  if (!status.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a dataset benchmark result: ", status.ToString()));
  }
  for (int i = 0; i < result.epochs_size(); ++i) {
    const DatasetBenchmarkEpoch& e = result.epochs(i);
    const std::pair<const char*, double> fields[] = {
        {"elements_processed", e.elements_processed()},
        {"total_bytes_processed", e.total_bytes_processed()},
        {"time_elapsed", e.time_elapsed()},
        {"elements_per_second", e.elements_per_second()},
        {"bandwidth", e.bandwidth()},
    };
    for (const auto& [name, value] : fields) {
      if (!std::isfinite(value) || value < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("dataset benchmark JSON: epochs[", i, "].", name,
                         " is ", value, "; it must be finite and >= 0"));
      }
    }
  }
  return result;
}

}  // namespace ipuflow::feeds
