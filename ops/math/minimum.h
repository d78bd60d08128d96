// Minimum: z = min(x, y), element-wise with numpy broadcasting.
//
//   Output clipped = ops::Minimum(scope, x, ops::Const(scope, 6.0f));
//
// NaN propagates (as numpy.minimum): if either input is NaN so is z. The
// gradient goes to x where x <= y (ties go to x), to y elsewhere.
#ifndef IPUFLOW_OPS_MATH_MINIMUM_H_
#define IPUFLOW_OPS_MATH_MINIMUM_H_

#include "core/scope.h"

namespace ipuflow::ops {

Output Minimum(const Scope& scope, Output x, Output y);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_MATH_MINIMUM_H_
