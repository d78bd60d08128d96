#include "ops/shape_fns.h"

#include "absl/strings/str_cat.h"

namespace ipuflow::ops::shape_fns {

absl::Status Unchanged(ShapeContext& c) {
  c.set_output(0, c.input_dtype(0), c.input_shape(0));
  return absl::OkStatus();
}

absl::Status UnchangedFloat(ShapeContext& c) {
  RETURN_IF_ERROR(c.ExpectFloat(0));
  return Unchanged(c);
}

absl::Status BroadcastBinary(ShapeContext& c) {
  RETURN_IF_ERROR(c.ExpectSameDType(0, 1));
  if (c.input_dtype(0) == DType::kBool ||
      c.input_dtype(0) == DType::kResource) {
    return absl::InvalidArgumentError(
        absl::StrCat("inputs are ", DTypeName(c.input_dtype(0)),
                     "; expected a numeric type"));
  }
  ASSIGN_OR_RETURN(TensorShape out,
                   BroadcastShapes(c.input_shape(0), c.input_shape(1)));
  c.set_output(0, c.input_dtype(0), out);
  return absl::OkStatus();
}

absl::Status BroadcastCompare(ShapeContext& c) {
  RETURN_IF_ERROR(c.ExpectSameDType(0, 1));
  ASSIGN_OR_RETURN(TensorShape out,
                   BroadcastShapes(c.input_shape(0), c.input_shape(1)));
  c.set_output(0, DType::kBool, out);
  return absl::OkStatus();
}

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

}  // namespace ipuflow::ops::shape_fns
