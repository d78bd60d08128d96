// Pad: surrounds x with a constant. `paddings` holds one (before, after)
// pair per dimension, flattened: {before_0, after_0, before_1, after_1, ...}.
//
//   // [N,28,28,C] -> [N,32,32,C], zeros around each image:
//   Output padded = ops::Pad(scope, images, {0, 0, 2, 2, 2, 2, 0, 0});
//   Output ones = ops::Pad(scope, x, {1, 1}, /*constant_value=*/1.0f);
//   // The gradient slices dy back to x's box.
#ifndef IPUFLOW_OPS_ARRAY_PAD_H_
#define IPUFLOW_OPS_ARRAY_PAD_H_

#include <vector>

#include "core/scope.h"

namespace ipuflow::ops {

// REQUIRES (checked): 2 * rank(x) non-negative paddings.
Output Pad(const Scope& scope, Output x, const std::vector<int64_t>& paddings,
           float constant_value = 0.0f);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_ARRAY_PAD_H_
