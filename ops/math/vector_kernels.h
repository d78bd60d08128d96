// VectorKernels: the float32 loops of the tutorial ConvNet's element-wise
// ops (Relu, ReluGrad, BiasAdd and its fused ReLU, BiasAddGrad's sums,
// Select), each compiled once for AVX2 (the build's x86-64-v3 baseline) and
// once for AVX-512 (per-function target attributes, raw intrinsics only, so
// no inline function compiled for AVX-512 can be linked into AVX2 code), and
// picked once per process from core/cpu_isa.h's UsedIsa():
//
//   const VectorKernels& k = UsedVectorKernels();
//   ctx.ParallelFor(n, kCwiseCost, [&](int64_t b, int64_t e) {
//     k.relu_grad(dy + b, y + b, dx + b, e - b);
//   });
//
// Every variant gives the same bits as the scalar definitions below,
// NaN and signed zero included, so the ISA never changes a result. Where
// the AVX-512 variant did not measure faster (kernel_vs_onednn_benchmark,
// BM_Kernel*), UsedVectorKernels() keeps the AVX2 one: on the 2-vCPU EPYC
// that is every kernel (these loops run at the caches' bandwidth;
// vector_kernels.cc has the measured ratios).
//
// Thread safety: the tables are immutable after their first use; the
// functions are reentrant (they touch only their arguments).
#ifndef IPUFLOW_OPS_MATH_VECTOR_KERNELS_H_
#define IPUFLOW_OPS_MATH_VECTOR_KERNELS_H_

#include <cstdint>

#include "core/cpu_isa.h"

namespace ipuflow::ops {

struct VectorKernels {
  // y[i] = std::max(x[i], 0.0f): NaN stays NaN, -0 stays -0. x == y allowed.
  void (*relu)(const float* x, float* y, int64_t n);
  // dx[i] = y[i] > 0 ? dy[i] : 0 (+0; NaN y gives 0). dx may alias dy.
  void (*relu_grad)(const float* dy, const float* y, float* dx, int64_t n);
  // y[i] = x[i] + b[i], then std::max(., 0.0f) if `relu`; b is the bias
  // tiled to n values by the caller. x == y allowed.
  void (*add_bias)(const float* x, const float* b, float* y, int64_t n,
                   bool relu);
  // acc[i] += x[i] (BiasAddGrad's per-position sums; order per element is
  // the caller's, so the sums do not depend on the ISA).
  void (*accumulate)(const float* x, float* acc, int64_t n);
  // z[i] = c[i] ? x[i] : y[i] for 4-byte elements, bit for bit (any
  // non-zero byte of c is true).
  void (*select4)(const bool* c, const void* x, const void* y, void* z,
                  int64_t n);
};

// Every kernel compiled for `isa`. REQUIRES: the CPU supports `isa`
// (DetectedIsa() >= isa); tests use these to check each variant.
const VectorKernels& VectorKernelsFor(CpuIsa isa);

// The kernels this process runs: per kernel, the AVX-512 variant if
// UsedIsa() is kAvx512 and that variant measured faster, else AVX2.
const VectorKernels& UsedVectorKernels();

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_MATH_VECTOR_KERNELS_H_
