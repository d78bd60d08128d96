// AVX-512 inner loops of the direct small-channel convolution kernels
// (ops/nn/conv_small.h): 16 output channels per register, the last register
// masked, so 10 channels take one register and 20 take two (with AVX2's 8
// lanes: two and three, overlapping). conv_small.cc gathers the pixels and
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

// Floats per register, and the widest output the loops take (two registers).
constexpr int kSmallConvLanes = 16;
constexpr int64_t kSmallConvMaxChannels = 2 * kSmallConvLanes;

// Registers per output pixel: ceil(oc / 16).
constexpr int SmallConvRegisters(int64_t oc) {
  return static_cast<int>((oc + kSmallConvLanes - 1) / kSmallConvLanes);
}

// For i < count and o < oc:
//   y[pixel[i] * oc + o] = sum over j < k of src[i][off[j]] * w[j * L + o]
// with L = 16 * SmallConvRegisters(oc): w is the filter packed to L floats
// per patch entry, zeros beyond oc. Writes only those oc floats per pixel.
void SmallConvForwardSet(const float* const* src, const int64_t* pixel,
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

}  // namespace ipuflow::ops::avx512

#endif  // IPUFLOW_OPS_NN_CONV_SMALL_AVX512_H_
