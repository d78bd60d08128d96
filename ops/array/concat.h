// Concat: joins tensors of one dtype and rank along `axis` (negative counts
// from the end); every other dimension must match.
//
//   Output both = ops::Concat(scope, {a, b}, 1);   // [N,3] and [N,5] -> [N,8]
//   Output rows = ops::Concat(scope, {x, y, z}, 0);
//   // The gradient cuts dy back into pieces shaped like each input.
#ifndef IPUFLOW_OPS_ARRAY_CONCAT_H_
#define IPUFLOW_OPS_ARRAY_CONCAT_H_

#include <vector>

#include "core/scope.h"

namespace ipuflow::ops {

// REQUIRES (checked): values is not empty.
Output Concat(const Scope& scope, const std::vector<Output>& values,
              int64_t axis);

// The gradient of Concat when the inputs' sizes along `axis` are known only
// at run time: dy cut along `axis` into one output shaped like each of
// `values` (whose data is not read).
std::vector<Output> ConcatGrad(const Scope& scope, Output dy,
                               const std::vector<Output>& values, int64_t axis);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_ARRAY_CONCAT_H_
