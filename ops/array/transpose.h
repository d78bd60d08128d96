// Transpose: permutes the dimensions of x, y.shape[i] = x.shape[perm[i]].
//
//   Output xt = ops::Transpose(scope, x, {1, 0});  // [N,C] -> [C,N]
//   Output nchw = ops::Transpose(scope, nhwc, {0, 3, 1, 2});
//   // The gradient is the transpose by the inverse permutation.
#ifndef IPUFLOW_OPS_ARRAY_TRANSPOSE_H_
#define IPUFLOW_OPS_ARRAY_TRANSPOSE_H_

#include <vector>

#include "core/scope.h"

namespace ipuflow::ops {

// `perm` is a permutation of [0, rank(x)).
Output Transpose(const Scope& scope, Output x,
                 const std::vector<int64_t>& perm);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_ARRAY_TRANSPOSE_H_
