// Stack: N tensors of one shape and dtype joined along a new dimension at
// `axis` (in [-rank-1, rank]; 0: the front), as tf.stack / torch.stack.
//
//   Output batch = ops::Stack(scope, {a, b, c});   // 3 x [H,W] -> [3,H,W]
//   Output pairs = ops::Stack(scope, {x, y}, -1);  // 2 x [N] -> [N,2]
//
// Any dtype. The gradient of values[i] is dy[..., i, ...] at `axis`.
#ifndef IPUFLOW_OPS_ARRAY_STACK_H_
#define IPUFLOW_OPS_ARRAY_STACK_H_

#include <cstdint>
#include <vector>

#include "core/scope.h"

namespace ipuflow::ops {

// REQUIRES (checked): at least one value; all of one dtype and shape.
Output Stack(const Scope& scope, const std::vector<Output>& values,
             int64_t axis = 0);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_ARRAY_STACK_H_
