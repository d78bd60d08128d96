// ReduceMean: the mean of x over `axes` (every axis when empty; negative axes
// count from the end). Reduced dimensions are removed, or kept with size 1 when
// `keep_dims`. Numeric dtypes.
//
//   Output loss = ops::ReduceMean(scope, per_example_loss);  // [N] -> []
//   Output mu = ops::ReduceMean(scope, x, {0, 1, 2}, true);
//   // [N,H,W,C] -> [1,1,1,C]
//
// float16 accumulates in float32; integers divide truncating. The mean over
// zero elements is NaN for floats (like numpy) and an InvalidArgument error
// for integers.
#ifndef IPUFLOW_OPS_MATH_REDUCE_MEAN_H_
#define IPUFLOW_OPS_MATH_REDUCE_MEAN_H_

#include <cstdint>
#include <vector>

#include "core/scope.h"

namespace ipuflow::ops {

Output ReduceMean(const Scope& scope, Output x, std::vector<int64_t> axes = {},
                  bool keep_dims = false);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_MATH_REDUCE_MEAN_H_
