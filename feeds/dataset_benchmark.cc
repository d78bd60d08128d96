#include "feeds/dataset_benchmark.h"

#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"

namespace ipuflow::feeds {
namespace {

using Clock = std::chrono::steady_clock;

std::string Needed(int64_t epochs, int64_t elements) {
  return absl::StrCat("number_of_epochs (", epochs, ") x elements_per_epoch (",
                      elements, ") = ", epochs * elements, " elements");
}

absl::Status CheckArgs(const DatasetPtr& ds, int64_t epochs, int64_t elements) {
  if (ds == nullptr) {
    return absl::InvalidArgumentError("DatasetBenchmark: no dataset given");
  }
  RETURN_IF_ERROR(ds->status());
  if (epochs < 1 || elements < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "DatasetBenchmark: number_of_epochs (", epochs,
        ") and elements_per_epoch (", elements, ") must both be >= 1"));
  }
  int64_t total;
  if (__builtin_mul_overflow(epochs, elements, &total)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "DatasetBenchmark: number_of_epochs (", epochs,
        ") x elements_per_epoch (", elements, ") overflows int64"));
  }
  const int64_t c = ds->Cardinality();
  if (c >= 0 && c < total) {
    return absl::OutOfRangeError(absl::StrCat(
        "DatasetBenchmark: ", ds->DebugString(), " has ", c,
        " elements but the benchmark needs ", Needed(epochs, elements),
        "; Repeat() the dataset or ask for fewer"));
  }
  return absl::OkStatus();
}

// Sums the byte sizes of `e`'s tensors, copying each into `scratch` (as
// into a device buffer) if `do_memcpy`.
int64_t Consume(const Element& e, bool do_memcpy, std::vector<char>& scratch) {
  int64_t bytes = 0;
  for (const Tensor& t : e) {
    const size_t n = t.TotalBytes();
    bytes += n;
    if (do_memcpy && n > 0) {
      if (scratch.size() < n) scratch.resize(n);
      std::memcpy(scratch.data(), t.raw_data(), n);
      // Tells the compiler the copy is used, so it is not optimised away.
      asm volatile("" : : "r"(scratch.data()) : "memory");
    }
  }
  return bytes;
}

struct Run {
  const Dataset* ds;
  int64_t epochs;
  int64_t elements;
  bool do_memcpy;
  std::vector<char> scratch;
};

// GetNext's error for element `i` of epoch `epoch`, explained.
absl::Status ElementError(const Run& run, int64_t epoch, int64_t i,
                          const absl::Status& s) {
  if (s.code() == absl::StatusCode::kOutOfRange) {
    return absl::OutOfRangeError(absl::StrCat(
        "DatasetBenchmark: ", run.ds->DebugString(), " ended after ",
        epoch * run.elements + i, " elements (epoch ", epoch + 1, " of ",
        run.epochs, ") but the benchmark needs ",
        Needed(run.epochs, run.elements),
        "; Repeat() the dataset or ask for fewer"));
  }
  return absl::Status(
      s.code(), absl::StrCat("DatasetBenchmark: element ", i, " of epoch ",
                             epoch + 1, ": ", s.message()));
}

absl::StatusOr<DatasetBenchmarkEpoch> RunEpoch(Run& run, Iterator& it,
                                               int64_t epoch) {
  int64_t bytes = 0;
  const Clock::time_point start = Clock::now();
  for (int64_t i = 0; i < run.elements; ++i) {
    absl::StatusOr<Element> e = it.GetNext();
    if (!e.ok()) return ElementError(run, epoch, i, e.status());
    bytes += Consume(*e, run.do_memcpy, run.scratch);
  }
  const double seconds = std::max(
      1e-9, std::chrono::duration<double>(Clock::now() - start).count());
  DatasetBenchmarkEpoch out;
  out.set_elements_processed(static_cast<double>(run.elements));
  out.set_total_bytes_processed(static_cast<double>(bytes));
  out.set_time_elapsed(seconds);
  out.set_elements_per_second(run.elements / seconds);
  out.set_bandwidth(bytes / (1e9 * seconds));
  return out;
}

void PrintEpoch(const DatasetBenchmarkEpoch& e, int64_t epoch, int64_t epochs) {
  std::fprintf(stderr,
               "DatasetBenchmark epoch %lld/%lld: %.0f elements, %.3f MB in "
               "%.6f s. Processed: %.1f elements/second. Bandwidth: %.4f "
               "GB/s\n",
               static_cast<long long>(epoch + 1),
               static_cast<long long>(epochs), e.elements_processed(),
               e.total_bytes_processed() / 1e6, e.time_elapsed(),
               e.elements_per_second(), e.bandwidth());
}

}  // namespace

absl::StatusOr<DatasetBenchmarkResult> RunDatasetBenchmark(
    const DatasetPtr& dataset, int64_t number_of_epochs,
    int64_t elements_per_epoch, bool print_stats, bool do_memcpy) {
  RETURN_IF_ERROR(CheckArgs(dataset, number_of_epochs, elements_per_epoch));
  Run run{dataset.get(), number_of_epochs, elements_per_epoch, do_memcpy, {}};
  std::unique_ptr<Iterator> it = dataset->MakeIterator();
  DatasetBenchmarkResult result;
  for (int64_t epoch = 0; epoch < number_of_epochs; ++epoch) {
    ASSIGN_OR_RETURN(DatasetBenchmarkEpoch e, RunEpoch(run, *it, epoch));
    if (print_stats) PrintEpoch(e, epoch, number_of_epochs);
    *result.add_epochs() = std::move(e);
  }
  return result;
}

absl::StatusOr<std::string> DatasetBenchmark(const DatasetPtr& dataset,
                                             int64_t number_of_epochs,
                                             int64_t elements_per_epoch,
                                             bool print_stats, bool do_memcpy) {
  ASSIGN_OR_RETURN(
      DatasetBenchmarkResult result,
      RunDatasetBenchmark(dataset, number_of_epochs, elements_per_epoch,
                          print_stats, do_memcpy));
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string json;
  const auto status =
      google::protobuf::util::MessageToJsonString(result, &json, options);
  if (!status.ok()) {
    return absl::InternalError(absl::StrCat(
        "DatasetBenchmark: JSON printing failed: ", status.ToString()));
  }
  return json;
}

}  // namespace ipuflow::feeds
