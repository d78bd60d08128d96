// SumToShapeOf and BroadcastLike: the two halves of numpy broadcasting, as
// ops, so gradients of broadcasting ops work even when shapes are only known
// at run time.
//
//   // z = x + y with x:[N,C], y:[C]  =>  dy = SumToShapeOf(dz, y)
//   Output dy = ops::SumToShapeOf(scope, dz, y);
//   Output b = ops::BroadcastLike(scope, bias, activations);  // [C] -> [N,C]
//
// ReduceGradTo skips the op when the shapes are statically equal.
#ifndef IPUFLOW_OPS_MATH_BROADCAST_GRAD_H_
#define IPUFLOW_OPS_MATH_BROADCAST_GRAD_H_

#include "core/graph.h"
#include "core/scope.h"

namespace ipuflow::ops {

// Sums `x` over the dimensions along which `like` was broadcast to x's shape.
Output SumToShapeOf(const Scope& scope, Output x, Output like);
// Broadcasts `x` to the shape of `like` (numpy rules).
Output BroadcastLike(const Scope& scope, Output x, Output like);
// `grad` reduced to x's shape; `grad` itself when the shapes are known equal.
Output ReduceGradTo(const Scope& scope, Output grad, Output x);

// Output `i` of `op`, for gradient functions that reuse the forward result
// (Exp, Sqrt, ReduceMax, ...). GradFn receives the node by const reference;
// a gradient only ever reads it, so dropping const here is safe.
inline Output OutputOf(const Node& op, int i = 0) {
  return Output(const_cast<Node*>(&op), i);
}

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_MATH_BROADCAST_GRAD_H_
