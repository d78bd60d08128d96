// Log: y = ln(x), element-wise; float32/float16.
//
//   Output log_p = ops::Log(scope, probabilities);
//
// Domain errors are values, not status errors (like numpy): log(0) is -inf,
// log of a negative number is NaN.
#ifndef IPUFLOW_OPS_MATH_LOG_H_
#define IPUFLOW_OPS_MATH_LOG_H_

#include "core/scope.h"

namespace ipuflow::ops {

Output Log(const Scope& scope, Output x);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_MATH_LOG_H_
