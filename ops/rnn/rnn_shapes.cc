#include "ops/rnn/rnn_shapes.h"

#include "absl/strings/str_cat.h"

namespace ipuflow::ops::rnn {
namespace {

bool Differ(int64_t a, int64_t b) {
  return a != kUnknownDim && b != kUnknownDim && a != b;
}

}  // namespace

absl::StatusOr<RnnDims> CheckRnnShapes(int gates, bool time_major,
                                       const TensorShape& input,
                                       const std::vector<TensorShape>& states,
                                       const TensorShape& kernel,
                                       const TensorShape& recurrent_kernel,
                                       const TensorShape& bias, int bias_rows) {
  const char* layout =
      time_major ? "[time, batch, input_size]" : "[batch, time, input_size]";
  if (input.rank() != 3) {
    return absl::InvalidArgumentError(absl::StrCat(
        "input ", input.DebugString(), " must have rank 3: ", layout));
  }
  if (recurrent_kernel.rank() != 2 || !recurrent_kernel.IsFullyDefined()) {
    return absl::InvalidArgumentError(
        absl::StrCat("recurrent_kernel ", recurrent_kernel.DebugString(),
                     " must be a fully known [units, ", gates, " * units]"));
  }
  RnnDims d;
  d.gates = gates;
  d.time_major = time_major;
  d.units = recurrent_kernel.dim(0);
  int64_t width = 0;
  if (!CheckedMul(d.units, gates, &width) || recurrent_kernel.dim(1) != width) {
    return absl::InvalidArgumentError(
        absl::StrCat("recurrent_kernel ", recurrent_kernel.DebugString(),
                     " must be [units, ", gates, " * units] = [", d.units, ",",
                     d.units * gates, "]"));
  }
  d.time = input.dim(time_major ? 0 : 1);
  d.batch = input.dim(time_major ? 1 : 0);
  d.input_size = input.dim(2);
  if (kernel.rank() != 2 || !kernel.IsFullyDefined() ||
      kernel.dim(1) != width || Differ(kernel.dim(0), d.input_size)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "kernel ", kernel.DebugString(), " must be [input_size, ", gates,
        " * units] = [", d.input_size == kUnknownDim ? "?" : "",
        d.input_size == kUnknownDim ? "" : absl::StrCat(d.input_size), ",",
        width, "] for input ", input.DebugString(), " (", layout,
        ") and recurrent_kernel ", recurrent_kernel.DebugString()));
  }
  d.input_size = kernel.dim(0);
  const TensorShape want_bias =
      bias_rows == 0 ? TensorShape({width}) : TensorShape({bias_rows, width});
  if (bias != want_bias) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bias ", bias.DebugString(), " must be ", want_bias.DebugString(),
        bias_rows == 0
            ? absl::StrCat(" ([", gates, " * units])")
            : absl::StrCat(" ([", bias_rows, ", ", gates,
                           " * units]: input and recurrent biases)")));
  }
  for (size_t i = 0; i < states.size(); ++i) {
    const TensorShape& s = states[i];
    if (s.rank() != 2 || Differ(s.dim(0), d.batch) ||
        Differ(s.dim(1), d.units)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "initial state ", i, " ", s.DebugString(),
          " must be [batch, units] = [",
          d.batch == kUnknownDim ? "?" : absl::StrCat(d.batch), ",", d.units,
          "] for input ", input.DebugString(), " (", layout, ")"));
    }
    if (d.batch == kUnknownDim) d.batch = s.dim(0);
  }
  return d;
}

absl::StatusOr<TensorShape> CacheShape(const RnnDims& d, int per_step) {
  int64_t width = 0, rows = 0, total = 0;
  if (!CheckedMul(d.units, per_step, &width) ||
      !CheckedMul(d.time, d.batch, &rows) || !CheckedMul(rows, width, &total) ||
      total > kMaxTensorElements / 4) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the cache for the gradient, [time ", d.time, ", batch ", d.batch, ", ",
        per_step, " * units ", d.units, "] float32, is too large"));
  }
  return TensorShape({d.time, d.batch, width});
}

}  // namespace ipuflow::ops::rnn
