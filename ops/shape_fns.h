// Shape functions shared by many ops. Each returns InvalidArgument naming
// the input at fault; Graph::AddNode prefixes the node and op.
#ifndef IPUFLOW_OPS_SHAPE_FNS_H_
#define IPUFLOW_OPS_SHAPE_FNS_H_

#include "core/op_registry.h"

namespace ipuflow::ops::shape_fns {

// Output 0 = input 0 (any dtype).
absl::Status Unchanged(ShapeContext& c);
// Output 0 = input 0, which must be float.
absl::Status UnchangedFloat(ShapeContext& c);
// Two inputs of one dtype, numpy-broadcast; output has that dtype.
absl::Status BroadcastBinary(ShapeContext& c);
// Like BroadcastBinary, but the output is bool (comparisons).
absl::Status BroadcastCompare(ShapeContext& c);
// Inputs 0 and 1: float, one dtype, equal shapes (an element-wise
// gradient's x or y and dy); output 0: that shape and dtype.
absl::Status SameShapeFloatPair(ShapeContext& c);

}  // namespace ipuflow::ops::shape_fns

#endif  // IPUFLOW_OPS_SHAPE_FNS_H_
