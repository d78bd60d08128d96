#include "ops/nn/elementwise_grad.h"

#include "absl/strings/str_cat.h"

namespace ipuflow::ops {

absl::Status SameShapeFloatPair(ShapeContext& c) {
  RETURN_IF_ERROR(c.ExpectFloat(0));
  RETURN_IF_ERROR(c.ExpectSameDType(0, 1));
  absl::StatusOr<TensorShape> merged =
      TensorShape::Merge(c.input_shape(0), c.input_shape(1));
  if (!merged.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        c.InputName(0), " has shape ", c.input_shape(0).DebugString(), " but ",
        c.InputName(1), " has shape ", c.input_shape(1).DebugString(),
        "; they must be equal"));
  }
  c.set_output(0, c.input_dtype(0), *merged);
  return absl::OkStatus();
}

}  // namespace ipuflow::ops
