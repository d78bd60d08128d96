#include "core/option_checks.h"

#include <charconv>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/tensor_shape.h"

namespace ipuflow {
namespace {

// The shortest text that reads back as `v` (as a float when `v` is one:
// a float field's 0.1f prints as 0.1), never rounded to 6 digits: a
// value just past a limit must not print as the limit.
std::string Number(double v) {
  char buf[64];
  std::to_chars_result r;
  const float f = static_cast<float>(v);
  if (std::isfinite(v) && static_cast<double>(f) == v) {
    r = std::to_chars(buf, buf + sizeof(buf), f);
  } else {
    r = std::to_chars(buf, buf + sizeof(buf), v);
  }
  return std::string(buf, r.ptr);
}

}  // namespace

OptionChecker& OptionChecker::Range(absl::string_view field, int64_t value,
                                    int64_t lo, int64_t hi,
                                    absl::string_view why) {
  if (value >= lo && value <= hi) return *this;
  return Fail(absl::StrCat(field, " is ", value, "; it must be between ", lo,
                           " and ", hi, why));
}

OptionChecker& OptionChecker::FiniteRange(absl::string_view field, double value,
                                          double lo, double hi,
                                          absl::string_view why) {
  if (std::isfinite(value) && value >= lo && value <= hi) return *this;
  return Fail(absl::StrCat(field, " is ", Number(value),
                           "; it must be a finite number between ", Number(lo),
                           " and ", Number(hi), why));
}

OptionChecker& OptionChecker::EnumValue(
    absl::string_view field, absl::string_view type, int64_t value,
    const std::vector<std::pair<int64_t, const char*>>& valid) {
  for (const auto& [v, name] : valid) {
    if (v == value) return *this;
  }
  std::vector<std::string> names;
  for (const auto& [v, name] : valid)
    names.push_back(absl::StrCat(v, " ", name));
  return Fail(absl::StrCat(field, " is ", value, ", not a ", type, " (",
                           absl::StrJoin(names, ", "), ")"));
}

int64_t OptionChecker::Product(
    std::initializer_list<std::pair<absl::string_view, int64_t>> factors,
    int64_t limit, absl::string_view why) {
  std::vector<std::string> names, values;
  int64_t product = 1;
  bool overflow = false;
  for (const auto& [name, v] : factors) {
    names.push_back(std::string(name));
    values.push_back(absl::StrCat(v));
    if (v < 0) return 0;
    if (!overflow && !CheckedMul(product, v, &product)) overflow = true;
  }
  if (!overflow && product <= limit) return product;
  Fail(absl::StrCat(
      absl::StrJoin(names, " x "), " = ", absl::StrJoin(values, " x "),
      overflow ? " overflows int64" : absl::StrCat(" = ", product),
      "; the limit is ", limit, why));
  return 0;
}

OptionChecker& OptionChecker::Fail(absl::string_view message) {
  messages_.push_back(std::string(message));
  return *this;
}

absl::Status OptionChecker::status() const {
  if (ok()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(owner_, ": ", absl::StrJoin(messages_, "; ")));
}

absl::StatusOr<int64_t> CheckedProduct(absl::string_view what, int64_t a,
                                       int64_t b) {
  int64_t out;
  if (!CheckedMul(a, b, &out)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ", a, " x ", b, " overflows int64"));
  }
  return out;
}

}  // namespace ipuflow
