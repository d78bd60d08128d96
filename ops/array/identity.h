// Identity: passes its input through unchanged (no copy). Useful to give a
// value a name, or as a point to hang control dependencies on.
//
//   Output logits = ops::Identity(scope.WithOpName("logits"), x);
#ifndef IPUFLOW_OPS_ARRAY_IDENTITY_H_
#define IPUFLOW_OPS_ARRAY_IDENTITY_H_

#include "core/scope.h"

namespace ipuflow::ops {

Output Identity(const Scope& scope, Output x);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_ARRAY_IDENTITY_H_
