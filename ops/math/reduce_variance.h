// ReduceVariance and ReduceStd: the variance, and its square root, of x over
// `axes` (every axis when empty; `keep_dims` as ReduceSum):
//   var = sum((x - mean)^2) / max(0, n - correction)
// with n the number of reduced elements. correction 0 (the default) is
// tf.math.reduce_variance / reduce_std (the population variance); 1 is
// torch.var / torch.std's default (Bessel's correction). float32 and
// float16 (computed in float32, two passes with pairwise sums, rounded once).
//
//   Output v = ops::ReduceVariance(scope, x, {0});            // [N,C] -> [C]
//   Output s = ops::ReduceStd(scope, x, {-1}, true, /*correction=*/1);
//
// n <= correction divides by 0 (inf, or NaN for a zero sum), as torch does.
// Gradients: dvar/dx = 2 (x - mean) / (n - correction); dstd/dx = (x -
// mean) / ((n - correction) std).
#ifndef IPUFLOW_OPS_MATH_REDUCE_VARIANCE_H_
#define IPUFLOW_OPS_MATH_REDUCE_VARIANCE_H_

#include <cstdint>
#include <vector>

#include "core/scope.h"

namespace ipuflow::ops {

// REQUIRES (checked): correction >= 0.
Output ReduceVariance(const Scope& scope, Output x,
                      std::vector<int64_t> axes = {}, bool keep_dims = false,
                      int64_t correction = 0);
Output ReduceStd(const Scope& scope, Output x, std::vector<int64_t> axes = {},
                 bool keep_dims = false, int64_t correction = 0);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_MATH_REDUCE_VARIANCE_H_
