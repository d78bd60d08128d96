// Direct Conv2D and Conv2DBackpropFilter kernels for convolutions with few
// output channels, such as a first layer on grey or RGB images (the tutorial
// ConvNet's 5x5x1 -> 10). There the im2col + GEMM path of conv_util.h
// multiplies [pixels x 25] by [25 x 10], a shape Eigen's GEMM runs at a
// quarter of its usual speed, and spends as long copying patches.
//
//   if (UseSmallConv(g, oc)) {
//     SmallConvForward(ctx, x, w, y, g, oc);  // NHWC x, [kh,kw,c,oc] w
//   }
//
// Both kernels read the input in place (a window that covers padding reads
// a zero-filled copy of its patch) and vectorise over the output channels,
// so they keep the general path's results up to float rounding. Their inner
// loops come in two variants, chosen per call from ipuflow::UsedIsa()
// (core/cpu_isa.h) and oc (SmallConvIsa): AVX2 (Eigen packets of 8 floats)
// and AVX-512 (conv_small_avx512.h: zmm registers, channel tails masked);
// on AVX-512, Conv2D with 9-12 or 17-24 channels vectorises over output
// pixels instead where that is faster (conv_rows_avx512.h). All sum each
// output in the same order and give bitwise equal results.
//
// Thread safety: pure functions over the kernel's intra-op pool; outputs
// are written by one shard each.
#ifndef IPUFLOW_OPS_NN_CONV_SMALL_H_
#define IPUFLOW_OPS_NN_CONV_SMALL_H_

#include <cstdint>
#include <functional>
#include <optional>

#include "core/cpu_isa.h"
#include "core/kernel.h"
#include "ops/nn/window_2d.h"

namespace ipuflow::ops {

// True when the SmallConv kernels handle a convolution of window `g` with
// `oc` output channels, which is where they beat the GEMM path: up to three
// SIMD packets of output channels (24 floats with AVX) with patches of up to
// 1024 floats (kh * kw * c), or four packets (32) with up to 64. Wider
// outputs keep the GEMM path, which Eigen runs well there. The limits are
// AVX2's (measured there) and kept with AVX-512, whose loops take the same
// shapes (up to 32 channels).
bool UseSmallConv(const Window2D& g, int64_t oc);

// Runs on output rows [r0, r1) (a row: one image's output row, ow * oc
// floats) as soon as they are complete, while they are in cache: a fused
// bias and activation (ops/nn/fused_bias_activation.h).
using ConvRowEpilogue = std::function<void(int64_t r0, int64_t r1)>;

// y [n, oh, ow, oc] = conv(x [n, h, w, c], w [kh, kw, c, oc]), all NHWC,
// then `epilogue` (if set) over each finished chunk of rows.
// REQUIRES: UseSmallConv(g, oc).
void SmallConvForward(const KernelContext& ctx, const float* x, const float* w,
                      float* y, const Window2D& g, int64_t oc,
                      const ConvRowEpilogue& epilogue = {});

// dw [kh, kw, c, oc] = sum over output pixels of patch(x)^T dy. Shards'
// partial sums are added in shard order, so results do not depend on
// timing. REQUIRES: UseSmallConv(g, oc).
void SmallConvBackpropFilter(const KernelContext& ctx, const float* x,
                             const float* dy, float* dw, const Window2D& g,
                             int64_t oc);

// The channel-packet inner loops SmallConv* use for `oc` output channels
// (but see SmallConvForwardByRows): kAvx512 when
// UsedIsa() is and oc is 9-16 or 25-32 (whole zmm registers, where they
// measured faster; conv_small.cc), or when the testing override says so
// (any oc up to 32); else kAvx2.
CpuIsa SmallConvIsa(int64_t oc);

// True when SmallConvForward runs the pixel-row loop of
// conv_rows_avx512.h (a lane per output pixel, a register per channel)
// instead of SmallConvIsa(oc)'s: with 9-12 or 17-24 channels when UsedIsa()
// (or the testing override) is kAvx512 and the shape is one where it
// measured as fast or faster (conv_small.cc). Bitwise equal results either
// way.
bool SmallConvForwardByRows(const Window2D& g, int64_t oc);

// For tests and benchmarks, when AVX-512 is in use: makes SmallConvForward
// take the pixel-row loop for every shape it can (true), for none (false),
// or where SmallConvForwardByRows's rule says (nullopt).
void SetSmallConvRowsForTesting(std::optional<bool> rows);

// For tests: makes SmallConv* use `isa`'s inner loops (nullopt: UsedIsa()'s
// again), so one process can compare both variants.
// REQUIRES: isa is not kAvx512 unless DetectedIsa() is.
void SetSmallConvIsaForTesting(std::optional<CpuIsa> isa);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_NN_CONV_SMALL_H_
