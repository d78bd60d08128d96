// ReduceMin: the minimum of x over `axes` (every axis when empty; negative
// axes count from the end). Reduced dimensions are removed, or kept with size
// 1 when `keep_dims`. Numeric dtypes.
//
//   Output m = ops::ReduceMin(scope, x, {-1}, true);  // [N,C] -> [N,1]
//
// As ReduceMax (tf.reduce_min): NaN propagates; the minimum over zero
// elements is an InvalidArgument error; the gradient goes to the positions
// holding the minimum, ties share it equally.
#ifndef IPUFLOW_OPS_MATH_REDUCE_MIN_H_
#define IPUFLOW_OPS_MATH_REDUCE_MIN_H_

#include <cstdint>
#include <vector>

#include "core/scope.h"

namespace ipuflow::ops {

Output ReduceMin(const Scope& scope, Output x, std::vector<int64_t> axes = {},
                 bool keep_dims = false);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_MATH_REDUCE_MIN_H_
