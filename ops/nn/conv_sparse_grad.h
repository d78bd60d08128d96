// Conv2D's two gradients computed from the nonzero entries of dy only, for
// convolutions followed by max pooling: MaxPoolGrad leaves at most one
// nonzero per pooling window and channel (a quarter of dy with 2x2 windows)
// and a ReLU after the pool zeroes more, so a dense backprop spends most of
// its multiply-adds on zeros. In the tutorial ConvNet (examples/models.h)
// both convolutions are such layers; their backprops were the pipeline's
// longest stage (issue 12).
//
//   if (UseSparseConvGrad(dy, g, oc)) {
//     SparseConvBackpropInput(ctx, dy, w, dx, g, oc);   // NHWC, HWIO filter
//   }
//
// A window row (kw * c floats) is contiguous in NHWC, and so is a filter
// row w[kh, :, :, o] once the filter is transposed to [oc][kh][kw * c]. The
// input gradient walks the pixels: per window row, dx's row += the pixel's
// nonzero channels' filter rows times their gradients, a few packets in
// registers. The filter gradient lists each channel's nonzero pixels, then
// per channel and window row sums gradient * input row over that list in
// registers. Both take only convolutions whose windows stay inside the
// input (VALID), with window rows of at least two packets; dy is counted
// first and the dense kernels take it above kSparseConvGradMaxDensity.
// Skipping exact zeros changes no sum (a NaN is not zero and is never
// skipped; an infinite or NaN weight or input meeting a zero gradient gives
// 0 here where the dense product gives NaN), so results match the dense
// kernels up to float rounding (another order of additions). The batch is
// split over the intra-op pool; filter partial sums are added in shard
// order, so results depend on the thread count but never on timing.
//
// Measured (conv_benchmark, one thread, CPU time, dy as 2x2 max pooling and
// ReLU pass it back, 17% nonzero; B2 = the ConvNet's 10 -> 20, k5, batch
// 40): filter gradient 157 us vs 321 (direct kernel), input gradient 245 us
// vs 367 (oneDNN), on a loaded machine.
//
// AVX-512 (conv_sparse_grad_avx512.h; the same sums in the same order, so
// bitwise equal results) where UsedIsa() allows. This EPYC (cpuid family
// 25 model 17, Zen 4) executes a 512-bit FMA at the lane rate of two
// 256-bit ones (116 GFLOP/s per thread either way in a register-only
// loop) and an unaligned 512-bit load always spans two cache lines, so
// the gains come from more accumulators, masks and compressed lists, not
// width. BM_B2_SparseConvGradPooledDy (the kernels called directly,
// isa:0/1 interleaved, medians of 7, CPU time, loaded machine): input
// gradient 138 us vs 181 with AVX2, filter gradient 116 us vs 129. The
// dense alternatives use AVX-512 too: oneDNN's input gradient 362 us,
// the direct filter gradient 319 us (same run, one thread). Scaled
// linearly from 17% nonzero, the sparse kernels would break even near 40%;
// only 17% was measured, so kSparseConvGradMaxDensity stays 0.3.
//
// Thread safety: pure functions; outputs are written by one shard each.
#ifndef IPUFLOW_OPS_NN_CONV_SPARSE_GRAD_H_
#define IPUFLOW_OPS_NN_CONV_SPARSE_GRAD_H_

#include <cstdint>

#include "core/cpu_isa.h"
#include "core/kernel.h"
#include "core/thread_pool.h"
#include "ops/nn/window_2d.h"

namespace ipuflow::ops {

// The largest fraction of nonzero dy entries at which the sparse kernels
// are used (above it the dense kernels are faster; see the .cc).
inline constexpr double kSparseConvGradMaxDensity = 0.3;

// The fraction of nonzero entries among dy's n floats (0 for n == 0).
double NonzeroFraction(const float* dy, int64_t n);

// True if the sparse kernels should compute the gradients of a convolution
// of window `g` with `oc` output channels and output gradient `dy` (NHWC,
// g.n * g.oh * g.ow * oc floats): dy is sparse enough and the patch is
// long enough to vectorise. Reads dy once.
bool UseSparseConvGrad(const float* dy, const Window2D& g, int64_t oc);

// dx [n, h, w, c] = conv^T(dy [n, oh, ow, oc], w [kh, kw, c, oc]).
void SparseConvBackpropInput(const KernelContext& ctx, const float* dy,
                             const float* w, float* dx, const Window2D& g,
                             int64_t oc);

// dw [kh, kw, c, oc] = sum over output pixels of patch(x)^T dy.
void SparseConvBackpropFilter(const KernelContext& ctx, const float* x,
                              const float* dy, float* dw, const Window2D& g,
                              int64_t oc);

// The same on `pool` with the inner loops of `isa` (the functions above
// pass ctx's intra-op pool and UsedIsa()); for tests and benchmarks that
// compare the two. REQUIRES: isa <= DetectedIsa().
void SparseConvBackpropInput(const ThreadPool& pool, CpuIsa isa,
                             const float* dy, const float* w, float* dx,
                             const Window2D& g, int64_t oc);
void SparseConvBackpropFilter(const ThreadPool& pool, CpuIsa isa,
                              const float* x, const float* dy, float* dw,
                              const Window2D& g, int64_t oc);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_NN_CONV_SPARSE_GRAD_H_
