// AVX-512 inner loops of the direct small-channel convolution kernels
// (ops/nn/conv_small.h). A pixel's oc output channels, rounded up to a
// multiple of 8, sit in 16-lane zmm registers plus, for an odd multiple of
// 8, one 8-lane ymm; the last register is masked, so no store or dy load
// leaves the pixel's channels: 10 channels take one zmm, 20 a zmm and a
// ymm, 32 two zmm (with AVX2: two, three and four overlapping ymm).
// conv_small.cc lists the pixels (interior ones as runs of a row) and
// picks these loops when ipuflow::UsedIsa() is kAvx512 (core/cpu_isa.h).
//
// Each output sums its terms in the same order as the AVX2 loops (patch
// entries ascending for Conv2D, pixels in set order for the filter), with
// the same fused multiply-adds, so both variants give bitwise equal results.
//
// REQUIRES (every function): DetectedIsa() == kAvx512, 1 <= oc <= 32.
// Thread safety: pure functions; callers give each thread its own outputs.
#ifndef IPUFLOW_OPS_NN_CONV_SMALL_AVX512_H_
#define IPUFLOW_OPS_NN_CONV_SMALL_AVX512_H_

#include <cstddef>
#include <cstdint>

namespace ipuflow::ops::avx512 {

// The widest output the loops take.
constexpr int64_t kSmallConvMaxChannels = 32;

// Floats per patch entry of the packed filter and of the filter sums: oc
// rounded up to a multiple of 8.
constexpr int64_t SmallConvPackedWidth(int64_t oc) { return (oc + 7) / 8 * 8; }

// For i < count and o < oc:
//   y[pixel[i] * oc + o] = sum over j < k of src[i][off[j]] * w[j * L + o]
// with L = SmallConvPackedWidth(oc): w is the filter packed to L floats per
// patch entry, zeros beyond oc. Writes only those oc floats per pixel.
void SmallConvForwardSet(const float* const* src, const int64_t* pixel,
                         int64_t count, const ptrdiff_t* off, int64_t k,
                         const float* w, int64_t oc, float* y);

// SmallConvForwardSet for the run of pixels pixel0 + i, i < count, whose
// patches start at src + i * step (one output row's interior pixels).
void SmallConvForwardRun(const float* src, ptrdiff_t step, int64_t pixel0,
                         int64_t count, const ptrdiff_t* off, int64_t k,
                         const float* w, int64_t oc, float* y);

// For j < k and o < oc, over i < count in order:
//   sum[j * L + o] += src[i][off[j]] * dy[(pixel[i] - pixel0) * dy_stride + o]
// (L as above). Reads only oc floats of each dy row; sum's lanes beyond oc
// are scratch.
void SmallConvFilterSet(const float* const* src, const int64_t* pixel,
                        int64_t count, const ptrdiff_t* off, int64_t k,
                        const float* dy, int64_t dy_stride, int64_t pixel0,
                        int64_t oc, float* sum);

// SmallConvFilterSet over runs r < runs in order, each the pixels
// run_pixel[r] + i, i < run_count[r], with patches at run_src[r] + i * step.
void SmallConvFilterRuns(const float* const* run_src, ptrdiff_t step,
                         const int64_t* run_pixel, const int64_t* run_count,
                         int64_t runs, const ptrdiff_t* off, int64_t k,
                         const float* dy, int64_t dy_stride, int64_t pixel0,
                         int64_t oc, float* sum);

}  // namespace ipuflow::ops::avx512

#endif  // IPUFLOW_OPS_NN_CONV_SMALL_AVX512_H_
