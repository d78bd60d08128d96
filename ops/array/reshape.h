// Reshape: the same elements with another shape (no copy). One dimension
// may be -1 and is inferred from the element count.
//
//   Output flat = ops::Reshape(scope, images, {-1, 784});   // [N,28,28,1]
#ifndef IPUFLOW_OPS_ARRAY_RESHAPE_H_
#define IPUFLOW_OPS_ARRAY_RESHAPE_H_

#include "core/scope.h"

namespace ipuflow::ops {

Output Reshape(const Scope& scope, Output x, const TensorShape& shape);
// Reshapes `x` to the (run-time) shape of `like`.
Output ReshapeLike(const Scope& scope, Output x, Output like);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_ARRAY_RESHAPE_H_
