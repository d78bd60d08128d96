// Reading back the JSON that DatasetBenchmark writes (feeds/
// dataset_benchmark.h), e.g. to compare a saved run with a new one.
//
//   ASSIGN_OR_RETURN(DatasetBenchmarkResult r, ParseDatasetBenchmarkJson(s));
//   double eps = r.epochs(0).elements_per_second();
//
// Errors (InvalidArgument) name the problem: malformed JSON (protobuf's
// parser message, with its position), an unknown field, or a value no run
// produces (a negative or non-finite number, naming the epoch and field).
//
// Thread safety: keeps no state; call from any thread.
#ifndef IPUFLOW_FEEDS_DATASET_BENCHMARK_JSON_H_
#define IPUFLOW_FEEDS_DATASET_BENCHMARK_JSON_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "feeds/dataset_benchmark.pb.h"

namespace ipuflow::feeds {

absl::StatusOr<DatasetBenchmarkResult> ParseDatasetBenchmarkJson(
    absl::string_view json);

}  // namespace ipuflow::feeds

#endif  // IPUFLOW_FEEDS_DATASET_BENCHMARK_JSON_H_
