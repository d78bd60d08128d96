// Scalar helpers shared by the math kernels: NaN tests that also compile for
// integers, NaN-propagating max/min functors (Eigen 3.4's vectorised and
// scalar max disagree about NaN, so kernels that promise numpy's NaN
// semantics use these through binaryExpr), and the type a reduction
// accumulates in.
//
//   z = a.binaryExpr(b, NanMax<float>());  // max(1, NaN) == NaN
//   using Acc = AccumType<half>;           // float
//
// Stateless; safe from any thread.
#ifndef IPUFLOW_OPS_MATH_SCALAR_OPS_H_
#define IPUFLOW_OPS_MATH_SCALAR_OPS_H_

#include <type_traits>

#include "core/dtype.h"
#include "core/half.h"

namespace ipuflow::ops {

template <typename T>
bool IsNaN(T x) {
  if constexpr (std::is_integral_v<T>) {
    return false;
  } else {
    return (Eigen::numext::isnan)(x);
  }
}

// max(x, y); NaN if either is NaN; ties keep x.
template <typename T>
struct NanMax {
  T operator()(T x, T y) const {
    return !IsNaN(x) && (IsNaN(y) || y > x) ? y : x;
  }
};

// min(x, y); NaN if either is NaN; ties keep x.
template <typename T>
struct NanMin {
  T operator()(T x, T y) const {
    return !IsNaN(x) && (IsNaN(y) || y < x) ? y : x;
  }
};

// float16 sums accumulate in float32; other types in themselves.
template <typename T>
using AccumType = std::conditional_t<std::is_same_v<T, half>, float, T>;

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_MATH_SCALAR_OPS_H_
