// BatchNorm: batch normalisation over every axis but the channels' (axis 1,
// NCHW, or the last, NHWC), as Keras BatchNormalization and PyTorch's
// nn.BatchNorm2d:
//   training:  y = (x - mean_B) / sqrt(var_B + epsilon) * gamma + beta with
//              the batch's mean and biased variance (BatchNorm: outputs y
//              and the float32 mean, variance and inv_std, [C]);
//   inference: the same with given statistics (BatchNormInference).
// In training the statistics may be taken over the batches of several
// replicas, as the IPU's replicated (distributed) batch norm does:
// replica_group_size 1 (the default) is this replica's batch, 0 every
// replica, k the replica groups of k (replica_group_type "consecutive" or
// "orthogonal", ops/collective/replica_groups_attr.h). The gradient then
// reduces its sums over the same replicas (BatchNormGrad); every replica
// must run the node. float32 and float16 (computed in float32).
//
// BatchNormalization is the layer: gamma, beta and the moving statistics as
// variables (float32 moving_mean / moving_variance, not trainable), the
// moving update moving = momentum * moving + (1 - momentum) * batch
// statistic in training (Keras' rule and default momentum 0.99; Keras and
// this layer keep the biased batch variance, PyTorch the unbiased one).
//
//   auto bn = ops::BatchNormalization(scope.NewSubScope("bn1"), x,
//                                     /*training=*/true);
//   // Run bn.updates as targets with the training step.
#ifndef IPUFLOW_OPS_NORM_BATCH_NORM_H_
#define IPUFLOW_OPS_NORM_BATCH_NORM_H_

#include <cstdint>
#include <string>
#include <vector>

#include "core/scope.h"
#include "ops/state/variable.h"

namespace ipuflow::ops {

struct BatchNormOptions {
  int64_t channels_axis = -1;  // 1 or the last axis.
  float epsilon = 1e-3f;       // Keras' default (PyTorch: 1e-5).
  // Training only: 1 this replica, 0 all replicas, k groups of k.
  int64_t replica_group_size = 1;
  std::string replica_group_type = "consecutive";
};

struct BatchNormOutputs {
  Output y;
  Output mean;      // float32 [C].
  Output variance;  // float32 [C], biased.
  Output inv_std;   // float32 [C].
};

BatchNormOutputs BatchNorm(const Scope& scope, Output x, Output gamma,
                           Output beta, const BatchNormOptions& options = {});

// mean and variance [C], float32 or x's dtype.
Output BatchNormInference(const Scope& scope, Output x, Output gamma,
                          Output beta, Output mean, Output variance,
                          const BatchNormOptions& options = {});

struct BatchNormLayerOptions {
  BatchNormOptions norm;
  float momentum = 0.99f;  // In [0, 1].
};

struct BatchNormLayer {
  Output y;
  VariableHandle gamma, beta, moving_mean, moving_variance;
  // Training: the moving statistics' Assign nodes, to run with the step.
  std::vector<Node*> updates;
};

// x's channel count must be known. Records an error in the scope (and
// returns invalid outputs) on bad input.
BatchNormLayer BatchNormalization(const Scope& scope, Output x, bool training,
                                  const BatchNormLayerOptions& options = {});

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_NORM_BATCH_NORM_H_
