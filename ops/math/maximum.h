// Maximum: z = max(x, y), element-wise with numpy broadcasting.
//
//   Output relu = ops::Maximum(scope, x, ops::Const(scope, 0.0f));
//
// NaN propagates (as numpy.maximum): if either input is NaN so is z. The
// gradient goes to x where x >= y (ties go to x), to y elsewhere.
#ifndef IPUFLOW_OPS_MATH_MAXIMUM_H_
#define IPUFLOW_OPS_MATH_MAXIMUM_H_

#include "core/scope.h"

namespace ipuflow::ops {

Output Maximum(const Scope& scope, Output x, Output y);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_MATH_MAXIMUM_H_
