// ReadVariable: a variable's value, as a snapshot: a later Assign cannot
// change a value already read. The snapshot shares the variable's buffer
// until the next write, which copies it first (copy-on-write), so reading
// a variable costs no copy.
//
//   Output h = ops::Variable(scope, DType::kFloat32, {2});
//   Output v = ops::ReadVariable(scope, h);    // float32[2]
//
// Reading a variable that was never assigned is FailedPrecondition naming
// it. Gradients stop at the read: differentiate with respect to its output
// (optimizers/optimizer.h does).
#ifndef IPUFLOW_OPS_STATE_READ_VARIABLE_H_
#define IPUFLOW_OPS_STATE_READ_VARIABLE_H_

#include "core/scope.h"

namespace ipuflow::ops {

// `handle` must be a Variable node's output.
Output ReadVariable(const Scope& scope, Output handle);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_STATE_READ_VARIABLE_H_
