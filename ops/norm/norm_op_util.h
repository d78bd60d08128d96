// What the normalisation ops share besides their arithmetic
// (norm_kernels.h): attribute and shape checks, and the backward kernel
// over inputs (dy, x, gamma, mean, inv_std) and outputs (dx, dgamma, dbeta).
#ifndef IPUFLOW_OPS_NORM_NORM_OP_UTIL_H_
#define IPUFLOW_OPS_NORM_NORM_OP_UTIL_H_

#include <vector>

#include "absl/types/span.h"
#include "core/graph.h"
#include "core/kernel.h"
#include "core/op_registry.h"
#include "ops/norm/norm_kernels.h"

namespace ipuflow::ops {

// epsilon must be finite and >= 0.
absl::Status CheckEpsilon(float epsilon);

// InvalidArgument naming the node and input `input` unless it has `shape`.
absl::Status ExpectParamShape(const KernelContext& ctx, int input,
                              const TensorShape& shape);

// A normalisation's statistics outputs (1, 2, ...) exist for its gradient
// and are not differentiated: an error naming the node if a gradient
// reaches one.
absl::Status OnlyOutputZeroDifferentiated(const Node& op,
                                          absl::Span<const Output> dy);

// Inputs dy, x, gamma, mean, inv_std (statistics float32); outputs dx
// (x's dtype), dgamma, dbeta (gamma's). See NormBackward.
absl::Status RunNormBackward(KernelContext& ctx, const NormLayout& layout,
                             const NormReplicas& replicas);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_NORM_NORM_OP_UTIL_H_
