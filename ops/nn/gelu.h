// Gelu: the Gaussian error linear unit (Hendrycks and Gimpel, 2016),
// element-wise; float32/float16. `approximate` is "none" (the default,
// torch.nn.GELU and tf.nn.gelu(approximate=False)):
//   y = x Phi(x) = x/2 erfc(-x / sqrt(2)),
// or "tanh" (torch's approximate='tanh', tf.nn.gelu(approximate=True) and
// Graphcore's ipu.ops.nn_ops.gelu):
//   y = x/2 (1 + tanh(u)) = x sigmoid(2u),  u = sqrt(2/pi) (x + 0.044715 x^3).
// Both are computed in float64 and rounded once, written without the
// cancellation of 1 + erf / 1 + tanh for
// negative x, so the left tail stays accurate in float32 (PyTorch's
// formulas give 0 below about -5.5 and lose digits before that).
// GeluGrad(x, dy) = dy (Phi(x) + x phi(x)), or the tanh form's derivative.
//
//   Output h = ops::Gelu(scope, ops::MatMul(scope, x, w));
#ifndef IPUFLOW_OPS_NN_GELU_H_
#define IPUFLOW_OPS_NN_GELU_H_

#include <string>

#include "core/scope.h"

namespace ipuflow::ops {

Output Gelu(const Scope& scope, Output x,
            const std::string& approximate = "none");
// dx for Gelu(x) given dy (what its gradient builds).
Output GeluGrad(const Scope& scope, Output x, Output dy,
                const std::string& approximate = "none");

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_NN_GELU_H_
