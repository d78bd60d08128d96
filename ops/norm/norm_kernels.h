// The kernels behind LayerNorm, GroupNorm / InstanceNorm and BatchNorm:
// one normalisation of a tensor viewed as [N, C, S] (channels first) or
// [N, S, C] (channels last), with statistics per (batch element, group of
// channels) or, for batch normalisation, per group over the whole batch.
// Statistics are biased (divided by the count, as Keras, PyTorch's
// normalised output and PopLibs' unbiasedVarEstimate=false) and summed in
// float64, two passes (mean, then the squares around it); inputs are
// widened to float32 and each output rounded once.
//
// Work is split into at most kNormChunks fixed chunks of the batch whose
// partial sums are added in chunk order, so results do not depend on the
// number of threads.
//
// Thread safety: stateless; kernels call these on their own thread and
// share the work over the intra-op pool.
#ifndef IPUFLOW_OPS_NORM_NORM_KERNELS_H_
#define IPUFLOW_OPS_NORM_NORM_KERNELS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "core/ipu/collective_group.h"
#include "core/kernel.h"
#include "core/tensor_shape.h"

namespace ipuflow::ops {

struct NormLayout {
  int64_t batch = 1;     // N.
  int64_t channels = 1;  // C.
  int64_t spatial = 1;   // S: the product of the other dimensions.
  bool channels_last = true;
  int64_t groups = 1;  // G; divides C.
  // Graphcore's grouping (PopLibs GroupNorm.hpp): group g holds channels
  // g, g + G, g + 2G, ...; otherwise the contiguous block of C / G.
  bool strided = false;
  // Statistics over the whole batch (BatchNorm), not per batch element.
  bool across_batch = false;

  int64_t Group(int64_t c) const {
    return strided ? c % groups : c / (channels / groups);
  }
  int64_t NumStats() const { return across_batch ? groups : batch * groups; }
  int64_t Stat(int64_t n, int64_t c) const {
    return across_batch ? Group(c) : n * groups + Group(c);
  }
  // Elements behind one statistic (on one replica).
  int64_t Count() const {
    return (across_batch ? batch : 1) * spatial * (channels / groups);
  }
};

// The layout of a tensor of `shape` normalised over its channel axis
// `channels_axis` (1 or rank - 1; negative counts from the end), with
// `groups` groups. InvalidArgument naming the attribute or dimension at
// fault (rank < 2, another axis, groups not dividing C). Unknown dims are
// taken as 1 (for shape functions, which check only what is known).
absl::StatusOr<NormLayout> ChannelLayout(const TensorShape& shape,
                                         int64_t channels_axis, int64_t groups);

// How statistics are shared between replicas (BatchNorm's option): size 1
// is one replica's batch; otherwise the group of replicas reduced over
// (ops/collective/replica_groups_attr.h).
struct NormReplicas {
  bool local = true;
  ReplicaGroups groups;
};

// Forward, in training mode. x and y are N*C*S floats in `layout`; gamma and
// beta C floats. Writes mean and inv_std (1 / sqrt(var + epsilon)), and the
// biased var when `var` is not null: NumStats() floats each.
absl::Status NormForward(KernelContext& ctx, const NormLayout& layout,
                         const NormReplicas& replicas, const float* x,
                         const float* gamma, const float* beta, float epsilon,
                         float* y, float* mean, float* var, float* inv_std);

// y = (x - mean) * inv_std * gamma + beta with given statistics (inference).
void NormApply(const KernelContext& ctx, const NormLayout& layout,
               const float* x, const float* gamma, const float* beta,
               const float* mean, const float* inv_std, float* y);

// Backward of NormForward (the statistics depend on x):
//   dx = inv_std * (dy gamma - mean(dy gamma) - xhat mean(dy gamma xhat)),
//   dgamma = sum dy xhat, dbeta = sum dy,
// means over each statistic's elements (and replicas), xhat =
// (x - mean) * inv_std. dgamma and dbeta are this replica's.
absl::Status NormBackward(KernelContext& ctx, const NormLayout& layout,
                          const NormReplicas& replicas, const float* dy,
                          const float* x, const float* gamma, const float* mean,
                          const float* inv_std, float* dx, float* dgamma,
                          float* dbeta);

// Backward of NormApply (statistics are inputs): dx = dy gamma inv_std,
// dgamma, dbeta as above, and per statistic dmean = -sum(dy gamma) inv_std,
// dvar = -1/2 sum(dy gamma xhat) inv_std^2 (across_batch layouts only).
void NormApplyBackward(const KernelContext& ctx, const NormLayout& layout,
                       const float* dy, const float* x, const float* gamma,
                       const float* mean, const float* inv_std, float* dx,
                       float* dgamma, float* dbeta, float* dmean, float* dvar);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_NORM_NORM_KERNELS_H_
