// Log1p: y = ln(1 + x), element-wise; float32/float16, the C library's log1pf
// (accurate for small x, where Log(1 + x) loses digits). log1p(-1) = -inf,
// x < -1 gives NaN.
//
//   Output y = ops::Log1p(scope, x);
#ifndef IPUFLOW_OPS_MATH_LOG1P_H_
#define IPUFLOW_OPS_MATH_LOG1P_H_

#include "core/scope.h"

namespace ipuflow::ops {

Output Log1p(const Scope& scope, Output x);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_MATH_LOG1P_H_
