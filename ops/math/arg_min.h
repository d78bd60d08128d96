// ArgMin: the index of the smallest element of x along `axis` (negative
// counts from the end), as int64 or, with output_type, int32. The axis is
// removed from the shape. Numeric dtypes.
//
//   Output nearest = ops::ArgMin(scope, distances, -1);  // [N,C] -> int64[N]
//   Output i = ops::ArgMin(scope, x, 0, DType::kInt32);
//
// Ties give the first index; NaN counts as smaller than any number (the first
// NaN wins, like numpy.argmin). An empty axis is an InvalidArgument error.
#ifndef IPUFLOW_OPS_MATH_ARG_MIN_H_
#define IPUFLOW_OPS_MATH_ARG_MIN_H_

#include <cstdint>

#include "core/scope.h"

namespace ipuflow::ops {

Output ArgMin(const Scope& scope, Output x, int64_t axis,
              DType output_type = DType::kInt64);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_MATH_ARG_MIN_H_
