// Relu: y = max(x, 0), element-wise; ReluGrad: its gradient, dy where the
// activation is positive and 0 elsewhere. float32 and float16.
//
//   Output h = ops::Relu(scope, ops::BiasAdd(scope, xw, b));
//   Output dx = ops::ReluGrad(scope, dh, h);  // what Relu's gradient builds
#ifndef IPUFLOW_OPS_NN_RELU_H_
#define IPUFLOW_OPS_NN_RELU_H_

#include "core/scope.h"

namespace ipuflow::ops {

Output Relu(const Scope& scope, Output x);
// dy where y > 0, else 0. `y` may be Relu's output or its input (both are
// positive at the same places).
Output ReluGrad(const Scope& scope, Output dy, Output y);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_NN_RELU_H_
