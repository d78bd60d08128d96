#include "core/dtype.h"

#include "absl/strings/str_cat.h"

namespace ipuflow {

size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return 4;
    case DType::kFloat16:
      return 2;
    case DType::kInt32:
      return 4;
    case DType::kInt64:
      return 8;
    case DType::kBool:
      return 1;
    case DType::kResource:
      return 0;
    case DType::kInvalid:
      return 0;
  }
  return 0;
}

absl::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return "float32";
    case DType::kFloat16:
      return "float16";
    case DType::kInt32:
      return "int32";
    case DType::kInt64:
      return "int64";
    case DType::kBool:
      return "bool";
    case DType::kResource:
      return "resource";
    case DType::kInvalid:
      return "invalid";
  }
  return "invalid";
}

absl::StatusOr<DType> DTypeFromName(absl::string_view name) {
  for (DType d : {DType::kFloat32, DType::kFloat16, DType::kInt32,
                  DType::kInt64, DType::kBool, DType::kResource}) {
    if (DTypeName(d) == name) return d;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown dtype '", name,
                   "'; expected one of float32, "
                   "float16, int32, int64, bool"));
}

}  // namespace ipuflow
