// DType: the element types a Tensor can hold, and their C++ counterparts.
//
//   DType t = DTypeOf<float>::value;          // DType::kFloat32
//   DTypeSize(DType::kFloat16) == 2;
//   DTypeName(DType::kInt64) == "int64";
//
// kResource is internal: the handle a Variable node passes to the ops that
// read or write it.
//
// `half` is only named here: a file that computes with half values includes
// core/half.h (Eigen, about 1.5 s of compile time per file that includes it,
// which two thirds of the files never need).
#ifndef IPUFLOW_CORE_DTYPE_H_
#define IPUFLOW_CORE_DTYPE_H_

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace Eigen {
struct half;  // complete in core/half.h
}  // namespace Eigen

namespace ipuflow {

using half = Eigen::half;

// Values match the GraphDef proto's DataType enum.
enum class DType : int8_t {
  kInvalid = 0,
  kFloat32 = 1,
  kFloat16 = 2,
  kInt32 = 3,
  kInt64 = 4,
  kBool = 5,
  kResource = 6,
};

size_t DTypeSize(DType dtype);
absl::string_view DTypeName(DType dtype);
absl::StatusOr<DType> DTypeFromName(absl::string_view name);
inline bool IsFloating(DType d) {
  return d == DType::kFloat32 || d == DType::kFloat16;
}
inline bool IsInteger(DType d) {
  return d == DType::kInt32 || d == DType::kInt64;
}
// The types AddGradients propagates through.
inline bool IsDifferentiable(DType d) { return IsFloating(d); }
// The types whose tensors hold values (not kInvalid, not kResource).
inline bool HoldsValues(DType d) {
  return IsFloating(d) || IsInteger(d) || d == DType::kBool;
}

// `x` converted to the integer type I, saturating at I's bounds, NaN to 0:
// the defined form of a float-to-integer conversion, which C++ leaves
// undefined outside I's range (TensorFlow's and XLA's casts saturate too).
template <typename I, typename F>
I SaturatingToInteger(F x) {
  static_assert(std::is_integral_v<I> && std::is_signed_v<I>);
  const double v = static_cast<double>(x);
  // -2^k and 2^k are exact doubles for k = 31 and 63.
  constexpr double kLo = static_cast<double>(std::numeric_limits<I>::min());
  if (std::isnan(v)) return 0;
  if (v <= kLo) return std::numeric_limits<I>::min();
  if (v >= -kLo) return std::numeric_limits<I>::max();
  return static_cast<I>(v);
}

template <typename T>
struct DTypeOf;
template <>
struct DTypeOf<float> {
  static constexpr DType value = DType::kFloat32;
};
template <>
struct DTypeOf<half> {
  static constexpr DType value = DType::kFloat16;
};
template <>
struct DTypeOf<int32_t> {
  static constexpr DType value = DType::kInt32;
};
template <>
struct DTypeOf<int64_t> {
  static constexpr DType value = DType::kInt64;
};
template <>
struct DTypeOf<bool> {
  static constexpr DType value = DType::kBool;
};

}  // namespace ipuflow

// Calls `MACRO(T)` with T bound to the C++ type of `dtype` for the listed
// families, or evaluates `ON_ERROR` for any other dtype. Used by kernels:
//   IPUFLOW_SWITCH_FLOAT(t.dtype(), return Run<T>(ctx),
//                        return Unsupported(ctx, t.dtype()));
#define IPUFLOW_CASE_(DT, TYPE, ...) \
  case DT: {                         \
    using T = TYPE;                  \
    __VA_ARGS__;                     \
    break;                           \
  }
#define IPUFLOW_SWITCH_FLOAT(dtype, STMT, ON_ERROR)                  \
  switch (dtype) {                                                   \
    IPUFLOW_CASE_(::ipuflow::DType::kFloat32, float, STMT)           \
    IPUFLOW_CASE_(::ipuflow::DType::kFloat16, ::ipuflow::half, STMT) \
    default: {                                                       \
      ON_ERROR;                                                      \
    }                                                                \
  }
#define IPUFLOW_SWITCH_NUMERIC(dtype, STMT, ON_ERROR)                \
  switch (dtype) {                                                   \
    IPUFLOW_CASE_(::ipuflow::DType::kFloat32, float, STMT)           \
    IPUFLOW_CASE_(::ipuflow::DType::kFloat16, ::ipuflow::half, STMT) \
    IPUFLOW_CASE_(::ipuflow::DType::kInt32, int32_t, STMT)           \
    IPUFLOW_CASE_(::ipuflow::DType::kInt64, int64_t, STMT)           \
    default: {                                                       \
      ON_ERROR;                                                      \
    }                                                                \
  }
#define IPUFLOW_SWITCH_ALL(dtype, STMT, ON_ERROR)                    \
  switch (dtype) {                                                   \
    IPUFLOW_CASE_(::ipuflow::DType::kFloat32, float, STMT)           \
    IPUFLOW_CASE_(::ipuflow::DType::kFloat16, ::ipuflow::half, STMT) \
    IPUFLOW_CASE_(::ipuflow::DType::kInt32, int32_t, STMT)           \
    IPUFLOW_CASE_(::ipuflow::DType::kInt64, int64_t, STMT)           \
    IPUFLOW_CASE_(::ipuflow::DType::kBool, bool, STMT)               \
    default: {                                                       \
      ON_ERROR;                                                      \
    }                                                                \
  }

#endif  // IPUFLOW_CORE_DTYPE_H_
