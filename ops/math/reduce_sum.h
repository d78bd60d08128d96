// ReduceSum: the sum of x over `axes` (every axis when empty; negative axes
// count from the end). Reduced dimensions are removed, or kept with size 1 when
// `keep_dims`. Numeric dtypes.
//
//   Output total = ops::ReduceSum(scope, x);                 // [2,3] -> []
//   Output rows = ops::ReduceSum(scope, x, {1});             // [2,3] -> [2]
//   Output cols = ops::ReduceSum(scope, x, {0}, true);       // [2,3] -> [1,3]
//
// float16 accumulates in float32; integers wrap on overflow. The sum over
// zero elements is 0.
#ifndef IPUFLOW_OPS_MATH_REDUCE_SUM_H_
#define IPUFLOW_OPS_MATH_REDUCE_SUM_H_

#include <cstdint>
#include <vector>

#include "core/scope.h"

namespace ipuflow::ops {

Output ReduceSum(const Scope& scope, Output x, std::vector<int64_t> axes = {},
                 bool keep_dims = false);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_MATH_REDUCE_SUM_H_
