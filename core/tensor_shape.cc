#include "core/tensor_shape.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/status.h"

namespace ipuflow {

bool TensorShape::IsFullyDefined() const {
  for (int64_t d : dims_) {
    if (d < 0) return false;
  }
  return true;
}

int64_t TensorShape::num_elements() const { return DimProduct(0, rank()); }

int64_t TensorShape::DimProduct(int begin, int end) const {
  int64_t n = 1;
  bool wrapped = false;
  for (int i = begin; i < end; ++i) {
    if (dims_[i] < 0) return kUnknownDim;
    if (!wrapped && !CheckedMul(n, dims_[i], &n)) wrapped = true;
  }
  // A zero dimension after an overflow still makes the product 0.
  if (wrapped) {
    for (int i = begin; i < end; ++i) {
      if (dims_[i] == 0) return 0;
    }
    return INT64_MAX;
  }
  return n;
}

absl::StatusOr<int64_t> TensorShape::CheckedNumElements() const {
  if (!IsFullyDefined()) {
    return absl::InvalidArgumentError(
        absl::StrCat("shape ", DebugString(), " is not fully defined"));
  }
  RETURN_IF_ERROR(ValidateShape(*this));
  return num_elements();
}

absl::Status ValidateShape(const TensorShape& shape) {
  int64_t n = 1;
  bool zero = false;
  bool too_big = false;
  for (int64_t d : shape.dims()) {
    if (d < kUnknownDim) {
      return absl::InvalidArgumentError(absl::StrCat(
          "shape [", absl::StrJoin(shape.dims(), ","), "] has dimension ", d,
          " (dimensions are >= 0, or -1: unknown)"));
    }
    if (d == 0) zero = true;
    if (d <= 0 || too_big) continue;
    if (!CheckedMul(n, d, &n) || n > kMaxTensorElements) too_big = true;
  }
  if (too_big && !zero) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shape ", shape.DebugString(), " has more than ", kMaxTensorElements,
        " (2^48) elements, ipuflow's limit for one tensor"));
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> CheckedByteSize(int64_t num_elements,
                                        int64_t element_size,
                                        const std::string& what) {
  int64_t bytes = 0;
  if (num_elements < 0 || element_size < 0 ||
      !CheckedMul(num_elements, element_size, &bytes) ||
      bytes > kMaxTensorBytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("tensor ", what, " needs ", num_elements, " x ",
                     element_size, " bytes, over ipuflow's limit of ",
                     kMaxTensorBytes, " bytes (2^48) for one tensor"));
  }
  return bytes;
}

absl::StatusOr<int64_t> PaddedDim(int64_t dim, int64_t before, int64_t after) {
  int64_t sum = 0;
  if (dim < 0 || before < 0 || after < 0 || !CheckedAdd(dim, before, &sum) ||
      !CheckedAdd(sum, after, &sum) || sum > kMaxTensorElements) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dimension ", dim, " padded by ", before, " and ", after,
        " is negative or over ", kMaxTensorElements, " (2^48) elements"));
  }
  return sum;
}

bool TensorShape::IsCompatibleWith(const TensorShape& other) const {
  if (rank() != other.rank()) return false;
  for (int i = 0; i < rank(); ++i) {
    if (dims_[i] >= 0 && other.dims_[i] >= 0 && dims_[i] != other.dims_[i]) {
      return false;
    }
  }
  return true;
}

absl::StatusOr<TensorShape> TensorShape::Merge(const TensorShape& a,
                                               const TensorShape& b) {
  if (!a.IsCompatibleWith(b)) {
    return absl::InvalidArgumentError(absl::StrCat("shapes ", a.DebugString(),
                                                   " and ", b.DebugString(),
                                                   " are not compatible"));
  }
  TensorShape out = a;
  for (int i = 0; i < a.rank(); ++i) {
    if (out.dims_[i] < 0) out.dims_[i] = b.dims_[i];
  }
  return out;
}

std::string TensorShape::DebugString() const {
  return absl::StrCat("[",
                      absl::StrJoin(dims_, ",",
                                    [](std::string* out, int64_t d) {
                                      absl::StrAppend(
                                          out, d < 0 ? "?" : absl::StrCat(d));
                                    }),
                      "]");
}

absl::StatusOr<TensorShape> BroadcastShapes(const TensorShape& a,
                                            const TensorShape& b) {
  const int rank = std::max(a.rank(), b.rank());
  TensorShape out;
  for (int i = 0; i < rank; ++i) {
    const int ia = a.rank() - rank + i, ib = b.rank() - rank + i;
    const int64_t da = ia >= 0 ? a.dim(ia) : 1;
    const int64_t db = ib >= 0 ? b.dim(ib) : 1;
    int64_t d;
    if (da == 1) {
      d = db;
    } else if (db == 1) {
      d = da;
    } else if (da < 0 || db < 0) {
      d = da < 0 ? db : da;
    } else if (da == db) {
      d = da;
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "shapes ", a.DebugString(), " and ", b.DebugString(),
          " cannot be broadcast (dimension ", i, ": ", da, " vs ", db, ")"));
    }
    out.AddDim(d);
  }
  return out;
}

absl::StatusOr<int> NormalizeAxis(int64_t axis, int rank) {
  if (axis < -rank || axis >= std::max(rank, 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("axis ", axis, " is out of range for rank ", rank,
                     " (valid: [", -rank, ", ", std::max(rank - 1, 0), "])"));
  }
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

}  // namespace ipuflow
