// Option checks: the one validation style of ipuflow's public options
// structs (PipelineOptions, DataLoaderOptions, IPUConfig, LossScaling,
// OutputMode, the examples' flags). Every field is checked for its whole
// range, every enum for a value it names, and every product of fields in
// int64 checked arithmetic, never in `int`; every error is InvalidArgument
// naming the struct, the field, the value and the limit:
//
//   OptionChecker check("DataLoaderOptions");
//   check.Range("buffer_size", o.buffer_size, 0, kMaxBufferSize);
//   check.Enum("mode", o.mode, {DataLoaderMode::kSync, ...},
//              {"Sync", ...});
//   check.Product({{"batch_size", b}, {"device_iterations", d}},
//                 kMaxTensorElements);
//   RETURN_IF_ERROR(check.status());
//
//   "DataLoaderOptions: buffer_size is 1099511627776; it must be between 0
//    and 65536"
//   "DataLoaderOptions: mode is 7, not a DataLoaderMode (0 Sync, 1 Async,
//    2 AsyncRebatched)"
//   "DataLoaderOptions: batch_size x device_iterations = 3 x 2^62
//    overflows int64; the limit is 281474976710656"
//
// The checker collects every failed check (status() joins them with "; ",
// messages() lists them, for callers that report one violation per line),
// so a user fixing one field at a time does not meet a new error each time.
// A product skips a negative factor: its field's range check reports it.
//
// A value type; thread-compatible.
#ifndef IPUFLOW_CORE_OPTION_CHECKS_H_
#define IPUFLOW_CORE_OPTION_CHECKS_H_

#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ipuflow {

class OptionChecker {
 public:
  explicit OptionChecker(std::string owner) : owner_(std::move(owner)) {}

  // lo <= value <= hi. `why` (may be empty) follows the limit: " (the
  // largest IPU-POD)".
  OptionChecker& Range(absl::string_view field, int64_t value, int64_t lo,
                       int64_t hi, absl::string_view why = "");
  // A finite value with lo <= value <= hi (NaN and infinities refused).
  // Numbers print in their shortest exact form (16777217, not 1.67772e+07).
  OptionChecker& FiniteRange(absl::string_view field, double value, double lo,
                             double hi, absl::string_view why = "");
  // `value` (an enum's integer) is one of `valid`, whose names are `names`.
  OptionChecker& EnumValue(
      absl::string_view field, absl::string_view type, int64_t value,
      const std::vector<std::pair<int64_t, const char*>>& valid);
  template <typename E>
  OptionChecker& Enum(absl::string_view field, absl::string_view type, E value,
                      std::initializer_list<std::pair<E, const char*>> valid) {
    std::vector<std::pair<int64_t, const char*>> v;
    for (const auto& [e, name] : valid)
      v.push_back({static_cast<int64_t>(e), name});
    return EnumValue(field, type, static_cast<int64_t>(value), v);
  }
  // The product of the factors at most `limit`, computed in checked int64
  // arithmetic. Returns the product (0 if it fails or a factor is < 0).
  int64_t Product(
      std::initializer_list<std::pair<absl::string_view, int64_t>> factors,
      int64_t limit, absl::string_view why = "");
  // A failed rule of the caller's own.
  OptionChecker& Fail(absl::string_view message);

  bool ok() const { return messages_.empty(); }
  // OK, or InvalidArgument "<owner>: <message>; <message>...".
  absl::Status status() const;
  const std::vector<std::string>& messages() const { return messages_; }

 private:
  std::string owner_;
  std::vector<std::string> messages_;
};

// The product a x b, or InvalidArgument "<what>: a x b overflows int64".
absl::StatusOr<int64_t> CheckedProduct(absl::string_view what, int64_t a,
                                       int64_t b);

}  // namespace ipuflow

#endif  // IPUFLOW_CORE_OPTION_CHECKS_H_
