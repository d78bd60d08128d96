// Rounding float32 results to float16, the way the running IPU does it.
//
// A kernel that computes in float32 (the IPU's float32 partials) and
// produces a float16 output writes it through RoundToHalf, never through a
// bare Eigen cast: the device's FloatingPointBehaviour (core/floating_point.h)
// decides between round-to-nearest-even and stochastic rounding, and between
// NaN and saturation on overflow.
//
// Stochastic rounding (esr ON, or REPLICA_IDENTICAL_ONLY for a node whose
// outputs the compiler found replica-identical): x between adjacent float16
// values lo < x < hi becomes hi with probability (x - lo) / (hi - lo), so
// the mean of the rounded value is x. The random bits of an element come
// from a counter-based generator keyed by (seed, replica, node, output,
// element index, KernelContext::run_stream()): runs are reproducible, and
// the result does not depend on how the kernel chunks its output across
// threads. In REPLICA_IDENTICAL_ONLY mode the replica is left out of the
// key, so replica-identical values stay identical; other values round to
// nearest. Overflow (|x| >= 65520, or a stochastic round up to 2^16):
// NaN with nanoo (noted for the oflo trap), else +-65504. On the host
// (RunEnv::floating_point null): IEEE round to nearest even, inf on
// overflow.
//
// Cost: see half_rounding_benchmark.cc (nearest vs stochastic per element).
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
