// Pad: surrounds x with a constant, or (mode) with x's own values. `paddings`
// holds one (before, after) pair per dimension, flattened: {before_0,
// after_0, before_1, after_1, ...}. Modes, for x = [1, 2, 3] padded by 2:
//   constant   (default)  c c 1 2 3 c c
//   reflect               3 2 1 2 3 2 1   (tf REFLECT, torch reflect; <= n-1)
//   symmetric             2 1 1 2 3 3 2   (tf SYMMETRIC; <= n)
//   replicate             1 1 1 2 3 3 3   (torch replicate / edge; n >= 1)
//
//   // [N,28,28,C] -> [N,32,32,C], zeros around each image:
//   Output padded = ops::Pad(scope, images, {0, 0, 2, 2, 2, 2, 0, 0});
//   Output ones = ops::Pad(scope, x, {1, 1}, /*constant_value=*/1.0f);
//   Output r = ops::Pad(scope, images, {0, 0, 1, 1, 1, 1, 0, 0}, "reflect");
//   // The gradient slices dy back to x's box (constant), or sums the dy
//   // elements that copy each x element (PadGrad, float32 / float16).
#ifndef IPUFLOW_OPS_ARRAY_PAD_H_
#define IPUFLOW_OPS_ARRAY_PAD_H_

#include <string>
#include <vector>

#include "core/scope.h"

namespace ipuflow::ops {

// REQUIRES (checked): 2 * rank(x) non-negative paddings.
Output Pad(const Scope& scope, Output x, const std::vector<int64_t>& paddings,
           float constant_value = 0.0f);
// mode: "constant" (zeros), "reflect", "symmetric" or "replicate"; each
// padding within the mode's limit (checked; the error names it).
Output Pad(const Scope& scope, Output x, const std::vector<int64_t>& paddings,
           const std::string& mode);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_ARRAY_PAD_H_
