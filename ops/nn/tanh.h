// Tanh: y = tanh(x), element-wise; TanhGrad: its gradient expressed through
// the output, dx = dy * (1 - y^2). float32 and float16.
//
//   Output h = ops::Tanh(scope, ops::Add(scope, ops::MatMul(scope, x, w), b));
//   Output dx = ops::TanhGrad(scope, h, dh);   // what Tanh's gradient builds
#ifndef IPUFLOW_OPS_NN_TANH_H_
#define IPUFLOW_OPS_NN_TANH_H_

#include "core/scope.h"

namespace ipuflow::ops {

Output Tanh(const Scope& scope, Output x);
// dy * (1 - y^2), where y = Tanh(x).
Output TanhGrad(const Scope& scope, Output y, Output dy);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_NN_TANH_H_
