// Clamp: y = min(max(x, min), max), element-wise; float32/float16
// (torch.clamp with both bounds, tf.clip_by_value with scalar bounds).
// NaN stays NaN; min > max is an error. ClampGrad(x, dy) = dy where min <=
// x <= max, the bounds included (PyTorch's clamp rule; Hardtanh, in
// ops/nn, gives 0 at its bounds, as torch.nn.Hardtanh).
//
//   Output y = ops::Clamp(scope, x, -1.0f, 1.0f);
#ifndef IPUFLOW_OPS_MATH_CLAMP_H_
#define IPUFLOW_OPS_MATH_CLAMP_H_

#include "core/scope.h"

namespace ipuflow::ops {

Output Clamp(const Scope& scope, Output x, float min, float max);
// dx for Clamp(x) given dy (what its gradient builds).
Output ClampGrad(const Scope& scope, Output x, Output dy, float min, float max);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_MATH_CLAMP_H_
