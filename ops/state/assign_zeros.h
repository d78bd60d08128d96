// AssignZeros: variable = 0, in place: one pass over the variable's memory
// instead of Zeros (a [shape] intermediate written) + Assign (read back and
// copied). Gradient accumulators are reset with it after every weight update
// (optimizers/gradient_accumulation.h).
//
//   Node* reset = ops::AssignZeros(scope, accumulator.handle);
//
// Bitwise Assign(handle, Zeros(shape, dtype)): every dtype's zero (+0.0,
// false) is all zero bytes. A value a read still shares is left alone
// (copy-on-write, core/resource.h). No outputs.
#ifndef IPUFLOW_OPS_STATE_ASSIGN_ZEROS_H_
#define IPUFLOW_OPS_STATE_ASSIGN_ZEROS_H_

#include "core/scope.h"

namespace ipuflow::ops {

// variable = 0. The variable must hold a value already (FailedPrecondition
// naming it otherwise: the shape comes from that value).
Node* AssignZeros(const Scope& scope, Output handle);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_STATE_ASSIGN_ZEROS_H_
