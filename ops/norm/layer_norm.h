// LayerNorm: per token, as Keras LayerNormalization and PyTorch's
// nn.LayerNorm (and Graphcore's Keras layer, which reshapes to
// [tokens, features] first; IPU TensorFlow Addons, normalization.py):
// y = (x - mean) / sqrt(var + epsilon) * gamma + beta, mean and biased var
// over the axes [begin_norm_axis, rank) of each token. gamma and beta have
// the shape of those axes. Outputs y, and the float32 statistics mean and
// inv_std (1 / sqrt(var + epsilon), shape x.shape[:begin_norm_axis]) that
// the gradient (LayerNormGrad) reuses. float32 and float16 (computed in
// float32, rounded once).
//
//   auto ln = ops::LayerNorm(scope, hidden, gamma, beta);   // [B, S, H]
//   Output y = ln.y;
#ifndef IPUFLOW_OPS_NORM_LAYER_NORM_H_
#define IPUFLOW_OPS_NORM_LAYER_NORM_H_

#include <cstdint>

#include "core/scope.h"

namespace ipuflow::ops {

struct NormOutputs {
  Output y;
  Output mean;     // float32.
  Output inv_std;  // float32.
};

struct LayerNormOptions {
  int64_t begin_norm_axis = -1;  // Negative: from the end.
  float epsilon = 1e-3f;         // Keras' default (PyTorch: 1e-5).
};

NormOutputs LayerNorm(const Scope& scope, Output x, Output gamma, Output beta,
                      const LayerNormOptions& options = {});

struct NormGradOutputs {
  Output dx, dgamma, dbeta;
};

NormGradOutputs LayerNormGrad(const Scope& scope, Output dy, Output x,
                              Output gamma, Output mean, Output inv_std,
                              int64_t begin_norm_axis);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_NORM_LAYER_NORM_H_
