// DatasetBenchmark: how fast a Dataset delivers elements on the host, per
// epoch, as the JSON of Graphcore's ipu.dataset_benchmark. Use it to check
// that an input pipeline can keep the device busy.
//
//   DatasetPtr ds = FashionMnist(Split::kTrain)->Batch(32, true)->Repeat();
//   ASSIGN_OR_RETURN(std::string json, DatasetBenchmark(ds, 3, 1000));
//   // {"epochs":[{"elements_processed":1000,"total_bytes_processed":1.0e8,
//   //   "time_elapsed":0.02,"elements_per_second":50000,"bandwidth":5}, ...]}
//
// Each epoch times `elements_per_epoch` GetNext calls on one iterator (so
// epochs are consecutive windows of one pass, like the original), plus a
// memcpy of every tensor when do_memcpy is set, simulating the copy into a
// device buffer. bandwidth is in GB/s = bytes / (1e9 * seconds).
//
// Unlike the original, bad arguments are InvalidArgument errors (it hands
// back exception objects instead of raising them), and a dataset too short
// for epochs x elements is an OutOfRange error naming the numbers, never a
// hang: up front when its cardinality is known, otherwise when its iterator
// ends.
//
// Thread safety: the functions keep no state; call them from any thread.
#ifndef IPUFLOW_FEEDS_DATASET_BENCHMARK_H_
#define IPUFLOW_FEEDS_DATASET_BENCHMARK_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "feeds/dataset.h"
#include "feeds/dataset_benchmark.pb.h"

namespace ipuflow::feeds {

// The measurements as a message. print_stats logs one line per epoch to
// stderr.
absl::StatusOr<DatasetBenchmarkResult> RunDatasetBenchmark(
    const DatasetPtr& dataset, int64_t number_of_epochs,
    int64_t elements_per_epoch, bool print_stats = false,
    bool do_memcpy = true);

// The same as JSON (protobuf's JSON printer, proto field names, zeros
// included).
absl::StatusOr<std::string> DatasetBenchmark(const DatasetPtr& dataset,
                                             int64_t number_of_epochs,
                                             int64_t elements_per_epoch,
                                             bool print_stats = false,
                                             bool do_memcpy = true);

}  // namespace ipuflow::feeds

#endif  // IPUFLOW_FEEDS_DATASET_BENCHMARK_H_
