// Fuzz target: dataset benchmark JSON through ParseDatasetBenchmarkJson;
// what parses prints again.
#include "core/status.h"
#include "core/testing/fuzz.h"
#include "feeds/dataset_benchmark_json.h"
#include "google/protobuf/util/json_util.h"

IPUFLOW_FUZZ_TARGET(dataset_benchmark_json) {
  absl::StatusOr<ipuflow::feeds::DatasetBenchmarkResult> r =
      ipuflow::feeds::ParseDatasetBenchmarkJson(
          absl::string_view(reinterpret_cast<const char*>(data), size));
  if (!r.ok()) return;
  std::string json;
  IPU_CHECK(google::protobuf::util::MessageToJsonString(*r, &json).ok());
  IPU_CHECK(ipuflow::feeds::ParseDatasetBenchmarkJson(json).ok());
}
