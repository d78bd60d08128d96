// GroupNorm and InstanceNorm, as Graphcore's group_norm / instance_norm
// (TensorFlow IPU normalization_ops.py, PopLibs group norm): dim 0 is the
// batch; the channels are axis 1 (NCHW) or the last axis (NHWC); each
// batch element's channels are split into `groups` groups, and each group
// is normalised over its channels and every spatial position:
// y = (x - mean) / sqrt(var + epsilon) * gamma[c] + beta[c], biased var.
// Graphcore's default grouping is strided (group g holds channels
// g, g + G, ...; strided_channel_grouping, PopLibs GroupNorm.hpp); false
// gives the conventional contiguous blocks (PyTorch nn.GroupNorm).
// InstanceNorm is GroupNorm with one channel per group. Outputs y and the
// float32 mean and inv_std, [N, groups], reused by GroupNormGrad.
// Graphcore's ops-level layer_norm (groups = 1, over every non-batch axis)
// is GroupNorm with groups = 1; per-token layer norm is LayerNorm.
//
//   auto gn = ops::GroupNorm(scope, x, gamma, beta, {.groups = 8});
#ifndef IPUFLOW_OPS_NORM_GROUP_NORM_H_
#define IPUFLOW_OPS_NORM_GROUP_NORM_H_

#include <cstdint>

#include "core/scope.h"
#include "ops/norm/layer_norm.h"

namespace ipuflow::ops {

struct GroupNormOptions {
  int64_t groups = 2;
  int64_t channels_axis = -1;  // 1 or the last axis.
  float epsilon = 1e-6f;       // Graphcore's ops default (Keras layer: 1e-3).
  bool strided_channel_grouping = true;
};

NormOutputs GroupNorm(const Scope& scope, Output x, Output gamma, Output beta,
                      const GroupNormOptions& options = {});

// GroupNorm with groups = C (x's channel count must be known);
// options.groups is ignored.
NormOutputs InstanceNorm(const Scope& scope, Output x, Output gamma,
                         Output beta, const GroupNormOptions& options = {});

NormGradOutputs GroupNormGrad(const Scope& scope, Output dy, Output x,
                              Output gamma, Output mean, Output inv_std,
                              const GroupNormOptions& options);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_NORM_GROUP_NORM_H_
