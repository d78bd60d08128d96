#include "ops/nn/rowwise.h"

#include "absl/strings/str_cat.h"

namespace ipuflow::ops {

absl::Status RowwiseShape(ShapeContext& c) {
  RETURN_IF_ERROR(c.ExpectFloat(0));
  TensorShape shape = c.input_shape(0);
  for (int i = 1; i < c.num_inputs(); ++i) {
    RETURN_IF_ERROR(c.ExpectSameDType(0, i));
    absl::StatusOr<TensorShape> merged =
        TensorShape::Merge(shape, c.input_shape(i));
    if (!merged.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          c.InputName(0), " has shape ", c.input_shape(0).DebugString(),
          " but ", c.InputName(i), " has shape ",
          c.input_shape(i).DebugString(), "; they must be equal"));
    }
    shape = *merged;
  }
  if (shape.rank() < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(c.InputName(0),
                     " must have rank >= 1 (the last axis is normalised), "
                     "got shape ",
                     shape.DebugString()));
  }
  c.set_output(0, c.input_dtype(0), shape);
  return absl::OkStatus();
}

}  // namespace ipuflow::ops
