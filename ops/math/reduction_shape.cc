// The Reduce* ops' attributes and shapes (ops/math/reduction.h): `axes`
// normalised and checked, the reduced shape, the coalesced view the kernels
// (reduction.cc) iterate, and the shape functions.
#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ops/math/reduction.h"

namespace ipuflow::ops {

absl::StatusOr<std::vector<int>> NormalizeReductionAxes(
    absl::Span<const int64_t> axes, int rank) {
  std::vector<bool> reduced(rank, axes.empty());
  for (int64_t a : axes) {
    if (a < -rank || a >= rank) {
      return absl::InvalidArgumentError(absl::StrCat(
          "axis ", a, " is out of range for rank ", rank,
          rank == 0 ? " (a scalar has no axes)"
                    : absl::StrCat(" (valid: [", -rank, ", ", rank - 1, "])")));
    }
    const int n = static_cast<int>(a < 0 ? a + rank : a);
    if (reduced[n]) {
      return absl::InvalidArgumentError(
          absl::StrCat("axes [", absl::StrJoin(axes, ","), "] name axis ", n,
                       " twice (rank ", rank, ")"));
    }
    reduced[n] = true;
  }
  std::vector<int> out;
  for (int i = 0; i < rank; ++i) {
    if (reduced[i]) out.push_back(i);
  }
  return out;
}

TensorShape ReducedShape(const TensorShape& shape, absl::Span<const int> axes,
                         bool keep_dims) {
  std::vector<bool> reduced(shape.rank(), false);
  for (int a : axes) reduced[a] = true;
  TensorShape out;
  for (int i = 0; i < shape.rank(); ++i) {
    if (!reduced[i]) {
      out.AddDim(shape.dim(i));
    } else if (keep_dims) {
      out.AddDim(1);
    }
  }
  return out;
}

CoalescedShape Coalesce(const TensorShape& shape, absl::Span<const int> axes) {
  std::vector<bool> reduced(shape.rank(), false);
  for (int a : axes) reduced[a] = true;
  CoalescedShape out;
  for (int i = 0; i < shape.rank(); ++i) {
    if (shape.dim(i) == 1) continue;
    if (!out.dims.empty() && out.reduced.back() == reduced[i]) {
      out.dims.back() *= shape.dim(i);
    } else {
      out.dims.push_back(shape.dim(i));
      out.reduced.push_back(reduced[i]);
    }
  }
  return out;
}

namespace {

enum class Accepts { kNumeric, kFloat, kBool };

absl::Status ReductionShape(ShapeContext& c, Accepts accepts) {
  const DType dt = c.input_dtype(0);
  if (accepts == Accepts::kNumeric &&
      (dt == DType::kBool || dt == DType::kResource)) {
    return absl::InvalidArgumentError(absl::StrCat(
        c.InputName(0), " is ", DTypeName(dt), "; expected a numeric type"));
  }
  if (accepts == Accepts::kFloat) RETURN_IF_ERROR(c.ExpectFloat(0));
  if (accepts == Accepts::kBool)
    RETURN_IF_ERROR(c.ExpectDType(0, DType::kBool));
  ASSIGN_OR_RETURN(std::vector<int64_t> axes,
                   c.attr<std::vector<int64_t>>("axes"));
  ASSIGN_OR_RETURN(bool keep_dims, c.attr<bool>("keep_dims"));
  const TensorShape& in = c.input_shape(0);
  absl::StatusOr<std::vector<int>> norm =
      NormalizeReductionAxes(axes, in.rank());
  if (!norm.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(norm.status().message(), "; ", c.InputName(0),
                     " has shape ", in.DebugString()));
  }
  c.set_output(0, dt, ReducedShape(in, *norm, keep_dims));
  return absl::OkStatus();
}

}  // namespace

absl::Status ReductionShapeFn(ShapeContext& c) {
  return ReductionShape(c, Accepts::kNumeric);
}
absl::Status FloatReductionShapeFn(ShapeContext& c) {
  return ReductionShape(c, Accepts::kFloat);
}
absl::Status BoolReductionShapeFn(ShapeContext& c) {
  return ReductionShape(c, Accepts::kBool);
}

}  // namespace ipuflow::ops
