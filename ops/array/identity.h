// Identity: passes its input through unchanged (no copy). Useful to give a
// value a name, or as a point to hang control dependencies on.
//
//   Output logits = ops::Identity(scope.WithOpName("logits"), x);
#ifndef IPUFLOW_OPS_ARRAY_IDENTITY_H_
#define IPUFLOW_OPS_ARRAY_IDENTITY_H_

#include <string>

#include "core/op_registry.h"
#include "core/scope.h"

namespace ipuflow::ops {

Output Identity(const Scope& scope, Output x);

// Registers `name` as Identity is registered: one input, forwarded as the
// output without a copy, gradient dy. RecomputationCheckpoint is the other
// such op (the pipeline compiler reads it; its kernel is Identity's).
OpRegistration RegisterForwardingOp(const std::string& name);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_ARRAY_IDENTITY_H_
