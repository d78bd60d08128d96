// ScatterAdd and TakeAlongAxis: the pair of index ops along one axis, as
// torch.scatter_add / torch.gather (numpy.put_along_axis with add /
// numpy.take_along_axis). `indices` (int32 or int64) has x's rank and x's
// dimensions except at `axis`:
//   TakeAlongAxis: y[.., k, ..] = x[.., indices[.., k, ..], ..]
//                  (y: indices' shape)
//   ScatterAdd:    y = x;  y[.., indices[.., k, ..], ..] += updates[.., k, ..]
//                  (updates: indices' shape)
// An index outside [0, x.dim(axis)) is an InvalidArgument error naming it.
// ScatterAdd adds repeated indices in order, in float32 for float16 (each
// output rounded once) and wrapping for integers.
//
//   // TopK's gradient: dvalues put back at their positions.
//   Output dx =
//       ops::ScatterAdd(scope, ops::ZerosLike(scope, x), idx, dvalues, -1);
//   Output picked = ops::TakeAlongAxis(scope, logits, idx, -1);
//
// Gradients: each is the other's (d updates of ScatterAdd = TakeAlongAxis
// of dy; dx of TakeAlongAxis = ScatterAdd of dy into zeros); dx of ScatterAdd
// is dy. Indices are not differentiated.
#ifndef IPUFLOW_OPS_ARRAY_SCATTER_ADD_H_
#define IPUFLOW_OPS_ARRAY_SCATTER_ADD_H_

#include <cstdint>

#include "core/scope.h"

namespace ipuflow::ops {

Output ScatterAdd(const Scope& scope, Output x, Output indices, Output updates,
                  int64_t axis);
Output TakeAlongAxis(const Scope& scope, Output x, Output indices,
                     int64_t axis);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_ARRAY_SCATTER_ADD_H_
