// Assign, AssignAdd and AssignSub: write a variable. They have no outputs;
// run them as targets, or order other nodes after them with control inputs.
//
//   Node* init = ops::Assign(scope, w.handle,
//                            ops::Const<float>(scope, {1, 2}, {2}));
//   Node* inc = ops::AssignAdd(scope, step.handle, ops::Const(scope, 1.f));
//   RETURN_IF_ERROR(session.Run({}, {}, {init, inc}, nullptr));
//
// The value must have the variable's dtype and shape (no broadcasting); the
// error names the variable and both dtypes and shapes. AssignAdd/AssignSub
// on a variable never assigned are FailedPrecondition.
#ifndef IPUFLOW_OPS_STATE_ASSIGN_H_
#define IPUFLOW_OPS_STATE_ASSIGN_H_

#include "core/scope.h"

namespace ipuflow::ops {

// variable = value.
Node* Assign(const Scope& scope, Output handle, Output value);
// variable += delta.
Node* AssignAdd(const Scope& scope, Output handle, Output delta);
// variable -= delta.
Node* AssignSub(const Scope& scope, Output handle, Output delta);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_STATE_ASSIGN_H_
