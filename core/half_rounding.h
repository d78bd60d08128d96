// Rounding float32 results to float16, the way the running IPU does it.
//
// A kernel that computes in float32 (the IPU's float32 partials) and
// produces a float16 output writes it through RoundToHalf, never through a
// bare Eigen cast: the device's FloatingPointBehaviour (core/floating_point.h)
// decides between round-to-nearest-even and stochastic rounding, and between
// NaN and saturation on overflow.
#ifndef IPUFLOW_CORE_HALF_ROUNDING_H_
#define IPUFLOW_CORE_HALF_ROUNDING_H_

#include <cstdint>

#include "core/dtype.h"
#include "core/kernel.h"

namespace ipuflow {

// Rounds src[0, n) into dst, which holds elements [first, first + n) of the
// node's output `output` (the element index keys stochastic rounding, so a
// kernel may round its output in any number of chunks, on any threads).
void RoundToHalf(const KernelContext& ctx, int output, const float* src,
                 half* dst, int64_t n, int64_t first = 0);

// float16 -> float32 (exact).
void WidenHalf(const half* src, float* dst, int64_t n);

}  // namespace ipuflow

#endif  // IPUFLOW_CORE_HALF_ROUNDING_H_
