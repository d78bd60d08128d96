// What the loss ops share: the `reduction` attribute and a deterministic
// float64 sum over a fixed chunking (results do not depend on the number
// of threads).
#ifndef IPUFLOW_OPS_LOSS_LOSS_UTIL_H_
#define IPUFLOW_OPS_LOSS_LOSS_UTIL_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "core/kernel.h"
#include "core/tensor_shape.h"

namespace ipuflow::ops {

enum class Reduction { kNone, kSum, kMean, kBatchMean };

// "none", "sum", "mean", "batchmean"; InvalidArgument naming the value.
absl::StatusOr<Reduction> ParseReduction(const std::string& name);

// The loss's shape: `elementwise` for kNone, else a scalar.
TensorShape LossOutputShape(Reduction r, const TensorShape& elementwise);

// The factor a sum is scaled by: 1 / n (mean), 1 / dim 0 (batchmean), 1.
double ReductionScale(Reduction r, const TensorShape& shape);

// sum of term(i) for i in [0, n), in float64, in parallel over fixed
// chunks added in order.
double DeterministicSum(const KernelContext& ctx, int64_t n,
                        double cost_per_element,
                        const std::function<double(int64_t)>& term);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_LOSS_LOSS_UTIL_H_
