// CumSum: the running sum of x along `axis` (negative counts from the end),
// as tf.math.cumsum:
//   exclusive = false, reverse = false:  y[i] = x[0] + ... + x[i]
//   exclusive = true:                    y[i] = x[0] + ... + x[i-1] (y[0] = 0)
//   reverse = true:                      sums run from the end instead.
// f32, f16, i32, i64. Floats accumulate in float64 (float32) or float32
// (float16) and each output is rounded once, so a long axis keeps float32
// accuracy; integers wrap in two's complement on overflow.
//
//   Output c = ops::CumSum(scope, x, 1);                         // [N,T]
//   Output before = ops::CumSum(scope, x, -1, /*exclusive=*/true);
//
// The gradient is CumSum(dy) in the other direction.
#ifndef IPUFLOW_OPS_MATH_CUM_SUM_H_
#define IPUFLOW_OPS_MATH_CUM_SUM_H_

#include <cstdint>

#include "core/scope.h"

namespace ipuflow::ops {

Output CumSum(const Scope& scope, Output x, int64_t axis,
              bool exclusive = false, bool reverse = false);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_MATH_CUM_SUM_H_
