// ReduceMax: the maximum of x over `axes` (every axis when empty; negative axes
// count from the end). Reduced dimensions are removed, or kept with size 1 when
// `keep_dims`. Numeric dtypes.
//
//   Output m = ops::ReduceMax(scope, logits, {-1}, true);  // [N,C] -> [N,1]
//
// NaN propagates (like numpy.max). The maximum over zero elements is an
// InvalidArgument error (it has no identity). The gradient goes to the
// positions holding the maximum; ties share it equally.
#ifndef IPUFLOW_OPS_MATH_REDUCE_MAX_H_
#define IPUFLOW_OPS_MATH_REDUCE_MAX_H_

#include <cstdint>
#include <vector>

#include "core/scope.h"

namespace ipuflow::ops {

Output ReduceMax(const Scope& scope, Output x, std::vector<int64_t> axes = {},
                 bool keep_dims = false);

// The gradient of y = ReduceMax or ReduceMin(x, axes, keep_dims) for dy:
// dy at the positions where x equals y, shared equally between ties.
Output ReduceExtremumGradient(const Scope& scope, Output x, Output y, Output dy,
                              const std::vector<int64_t>& axes, bool keep_dims);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_MATH_REDUCE_MAX_H_
