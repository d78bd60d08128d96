// NoOp and Group: a node that does nothing, run for its control inputs.
//
//   Node* train = ops::Group(scope, {update_w, update_b});
//   session.Run({}, {loss}, {train}, &out);   // runs both updates
#ifndef IPUFLOW_OPS_STATE_NO_OP_H_
#define IPUFLOW_OPS_STATE_NO_OP_H_

#include <vector>

#include "core/scope.h"

namespace ipuflow::ops {

// A NoOp with the scope's control dependencies.
Node* NoOp(const Scope& scope);
// A NoOp that runs after every node of `deps` (and the scope's control
// dependencies). A null dep (from a failed builder) is an error.
Node* Group(const Scope& scope, const std::vector<Node*>& deps);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_STATE_NO_OP_H_
