// Select: z = cond ? x : y, element-wise. cond is bool; x and y share a
// dtype; the three shapes broadcast together (numpy rules), so cond may be
// the shape of x and y or, e.g., a [N,1] column choosing whole rows.
//
//   Output relu = ops::Select(scope, ops::Greater(scope, x, zero), x, zero);
#ifndef IPUFLOW_OPS_MATH_SELECT_H_
#define IPUFLOW_OPS_MATH_SELECT_H_

#include "core/scope.h"

namespace ipuflow::ops {

Output Select(const Scope& scope, Output cond, Output x, Output y);
// torch.where(cond, x, y) / tf.where(cond, x, y): Select under its other
// name (one op, so one kernel and one gradient).
Output Where(const Scope& scope, Output cond, Output x, Output y);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_MATH_SELECT_H_
