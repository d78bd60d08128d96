#include "ops/math/vector_kernels.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

namespace ipuflow::ops {
namespace {

// ---- AVX2 (the build's baseline): 8 lanes, two vectors per iteration,
// scalar tails.
namespace avx2 {

void Relu(const float* x, float* y, int64_t n) {
  const __m256 zero = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    // max(0, x) returns its second operand, x, when either is NaN, and x
    // for -0: std::max(x, 0.0f).
    const __m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + i + 8);
    _mm256_storeu_ps(y + i, _mm256_max_ps(zero, a));
    _mm256_storeu_ps(y + i + 8, _mm256_max_ps(zero, b));
  }
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(y + i, _mm256_max_ps(zero, _mm256_loadu_ps(x + i)));
  }
  for (; i < n; ++i) y[i] = std::max(x[i], 0.0f);
}

void ReluGrad(const float* dy, const float* y, float* dx, int64_t n) {
  const __m256 zero = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    // y > 0, ordered: false for NaN.
    const __m256 m0 = _mm256_cmp_ps(_mm256_loadu_ps(y + i), zero, _CMP_GT_OQ);
    const __m256 m1 =
        _mm256_cmp_ps(_mm256_loadu_ps(y + i + 8), zero, _CMP_GT_OQ);
    _mm256_storeu_ps(dx + i, _mm256_and_ps(m0, _mm256_loadu_ps(dy + i)));
    _mm256_storeu_ps(dx + i + 8,
                     _mm256_and_ps(m1, _mm256_loadu_ps(dy + i + 8)));
  }
  for (; i + 8 <= n; i += 8) {
    const __m256 m = _mm256_cmp_ps(_mm256_loadu_ps(y + i), zero, _CMP_GT_OQ);
    _mm256_storeu_ps(dx + i, _mm256_and_ps(m, _mm256_loadu_ps(dy + i)));
  }
  for (; i < n; ++i) dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

template <bool kRelu>
void AddBiasImpl(const float* x, const float* b, float* y, int64_t n) {
  const __m256 zero = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_add_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(b + i));
    if constexpr (kRelu) v = _mm256_max_ps(zero, v);
    _mm256_storeu_ps(y + i, v);
  }
  for (; i < n; ++i) {
    y[i] = kRelu ? std::max(x[i] + b[i], 0.0f) : x[i] + b[i];
  }
}

void AddBias(const float* x, const float* b, float* y, int64_t n, bool relu) {
  relu ? AddBiasImpl<true>(x, b, y, n) : AddBiasImpl<false>(x, b, y, n);
}

void Accumulate(const float* x, float* acc, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(acc + i, _mm256_add_ps(_mm256_loadu_ps(acc + i),
                                            _mm256_loadu_ps(x + i)));
  }
  for (; i < n; ++i) acc[i] += x[i];
}

// 8 conditions widened to a lane mask and blended per instruction.
void Select4(const bool* c, const void* x, const void* y, void* z, int64_t n) {
  const auto* px = static_cast<const char*>(x);
  const auto* py = static_cast<const char*>(y);
  auto* pz = static_cast<char*>(z);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    int64_t bytes;  // The 8 bools.
    std::memcpy(&bytes, c + i, 8);
    const __m256i mask = _mm256_cmpgt_epi32(
        _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(bytes)), _mm256_setzero_si256());
    const __m256i xv =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(px + 4 * i));
    const __m256i yv =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(py + 4 * i));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(pz + 4 * i),
                        _mm256_blendv_epi8(yv, xv, mask));
  }
  for (; i < n; ++i) std::memcpy(pz + 4 * i, (c[i] ? px : py) + 4 * i, 4);
}

}  // namespace avx2

// ---- AVX-512: 16 lanes, the tail as one masked vector (masked-off lanes
// are neither read nor written). Only intrinsics inside: an inline
// function compiled here for AVX-512 and emitted out of line could be
// picked by the linker for AVX2 callers.
#define IPUFLOW_AVX512 \
  __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl")))
namespace avx512 {

IPUFLOW_AVX512 inline __mmask16 TailMask(int64_t r) {
  return static_cast<__mmask16>((1u << r) - 1);
}

IPUFLOW_AVX512 void Relu(const float* x, float* y, int64_t n) {
  const __m512 zero = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 a = _mm512_loadu_ps(x + i), b = _mm512_loadu_ps(x + i + 16);
    _mm512_storeu_ps(y + i, _mm512_max_ps(zero, a));
    _mm512_storeu_ps(y + i + 16, _mm512_max_ps(zero, b));
  }
  for (; i + 16 <= n; i += 16) {
    _mm512_storeu_ps(y + i, _mm512_max_ps(zero, _mm512_loadu_ps(x + i)));
  }
  if (i < n) {
    const __mmask16 t = TailMask(n - i);
    _mm512_mask_storeu_ps(y + i, t,
                          _mm512_max_ps(zero, _mm512_maskz_loadu_ps(t, x + i)));
  }
}

IPUFLOW_AVX512 void ReluGrad(const float* dy, const float* y, float* dx,
                             int64_t n) {
  const __m512 zero = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __mmask16 m0 =
        _mm512_cmp_ps_mask(_mm512_loadu_ps(y + i), zero, _CMP_GT_OQ);
    const __mmask16 m1 =
        _mm512_cmp_ps_mask(_mm512_loadu_ps(y + i + 16), zero, _CMP_GT_OQ);
    _mm512_storeu_ps(dx + i, _mm512_maskz_loadu_ps(m0, dy + i));
    _mm512_storeu_ps(dx + i + 16, _mm512_maskz_loadu_ps(m1, dy + i + 16));
  }
  for (; i + 16 <= n; i += 16) {
    const __mmask16 m =
        _mm512_cmp_ps_mask(_mm512_loadu_ps(y + i), zero, _CMP_GT_OQ);
    _mm512_storeu_ps(dx + i, _mm512_maskz_loadu_ps(m, dy + i));
  }
  if (i < n) {
    const __mmask16 t = TailMask(n - i);
    const __mmask16 m = _mm512_mask_cmp_ps_mask(
        t, _mm512_maskz_loadu_ps(t, y + i), zero, _CMP_GT_OQ);
    _mm512_mask_storeu_ps(dx + i, t, _mm512_maskz_loadu_ps(m, dy + i));
  }
}

template <bool kRelu>
IPUFLOW_AVX512 void AddBiasImpl(const float* x, const float* b, float* y,
                                int64_t n) {
  const __m512 zero = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512 v = _mm512_add_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(b + i));
    if constexpr (kRelu) v = _mm512_max_ps(zero, v);
    _mm512_storeu_ps(y + i, v);
  }
  if (i < n) {
    const __mmask16 t = TailMask(n - i);
    __m512 v = _mm512_add_ps(_mm512_maskz_loadu_ps(t, x + i),
                             _mm512_maskz_loadu_ps(t, b + i));
    if constexpr (kRelu) v = _mm512_max_ps(zero, v);
    _mm512_mask_storeu_ps(y + i, t, v);
  }
}

IPUFLOW_AVX512 void AddBias(const float* x, const float* b, float* y, int64_t n,
                            bool relu) {
  relu ? AddBiasImpl<true>(x, b, y, n) : AddBiasImpl<false>(x, b, y, n);
}

IPUFLOW_AVX512 void Accumulate(const float* x, float* acc, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm512_storeu_ps(acc + i, _mm512_add_ps(_mm512_loadu_ps(acc + i),
                                            _mm512_loadu_ps(x + i)));
  }
  if (i < n) {
    const __mmask16 t = TailMask(n - i);
    _mm512_mask_storeu_ps(acc + i, t,
                          _mm512_add_ps(_mm512_maskz_loadu_ps(t, acc + i),
                                        _mm512_maskz_loadu_ps(t, x + i)));
  }
}

// 16 conditions tested to a mask register, one masked blend.
IPUFLOW_AVX512 void Select4(const bool* c, const void* x, const void* y,
                            void* z, int64_t n) {
  const auto* pc = reinterpret_cast<const char*>(c);
  const auto* px = static_cast<const int*>(x);
  const auto* py = static_cast<const int*>(y);
  auto* pz = static_cast<int*>(z);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m128i cb =
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(pc + i));
    const __mmask16 m = _mm_test_epi8_mask(cb, cb);
    _mm512_storeu_si512(pz + i,
                        _mm512_mask_blend_epi32(m, _mm512_loadu_si512(py + i),
                                                _mm512_loadu_si512(px + i)));
  }
  if (i < n) {
    const __mmask16 t = TailMask(n - i);
    const __m128i cb = _mm_maskz_loadu_epi8(t, pc + i);
    const __mmask16 m = _mm_test_epi8_mask(cb, cb);
    _mm512_mask_storeu_epi32(
        pz + i, t,
        _mm512_mask_blend_epi32(m, _mm512_maskz_loadu_epi32(t, py + i),
                                _mm512_maskz_loadu_epi32(t, px + i)));
  }
}

}  // namespace avx512
#undef IPUFLOW_AVX512

constexpr VectorKernels kAvx2 = {avx2::Relu, avx2::ReluGrad, avx2::AddBias,
                                 avx2::Accumulate, avx2::Select4};
constexpr VectorKernels kAvx512 = {avx512::Relu, avx512::ReluGrad,
                                   avx512::AddBias, avx512::Accumulate,
                                   avx512::Select4};

// Per kernel, AVX-512 where it measured faster: none of them, so far. On
// the 2-vCPU AMD EPYC with AVX-512F/BW/DQ/VL (session 8, BM_Kernel* of
// //ops/nn:kernel_vs_onednn_benchmark, variants interleaved at random,
// 5-9 repetitions, median CPU time, AVX2 time / AVX-512 time, four runs):
//   relu        [40,12,12,10] 0.89-1.02   [40,4,4,20] 1.00-1.01
//   relu_grad   [40,12,12,10] 0.98-1.00   [40,4,4,20] 1.00
//   select4     [40,12,12,10] 0.99-1.00   [40,4,4,20] 0.96-0.97
//   add_bias    [40,24,24,10] 0.75-0.96   [40,8,8,20] 0.86-0.98 (+ReLU)
//   accumulate  [40,24,24,10] 0.92-0.98   [40,8,8,20] 0.98-1.01
// (at most 2% faster, within the runs' spread; often slower).
// These loops move 8-12 bytes per element and do one operation on them:
// they run at the cache's bandwidth, which the vector width does not
// change, and a 64-byte vector at a block's unaligned start splits over two
// cache lines twice as often as a 32-byte one. The AVX-512 variants stay
// compiled and tested, to be switched on here per kernel where a
// measurement on some CPU shows them faster.
constexpr bool kAvx512Faster[] = {/*relu=*/false, /*relu_grad=*/false,
                                  /*add_bias=*/false, /*accumulate=*/false,
                                  /*select4=*/false};
static_assert(sizeof(kAvx512Faster) == sizeof(VectorKernels) / sizeof(void*),
              "one entry per kernel of VectorKernels");

VectorKernels Choose() {
  VectorKernels k = kAvx2;
  if (UsedIsa() != CpuIsa::kAvx512) return k;
  if (kAvx512Faster[0]) k.relu = kAvx512.relu;
  if (kAvx512Faster[1]) k.relu_grad = kAvx512.relu_grad;
  if (kAvx512Faster[2]) k.add_bias = kAvx512.add_bias;
  if (kAvx512Faster[3]) k.accumulate = kAvx512.accumulate;
  if (kAvx512Faster[4]) k.select4 = kAvx512.select4;
  return k;
}

}  // namespace

const VectorKernels& VectorKernelsFor(CpuIsa isa) {
  return isa == CpuIsa::kAvx512 ? kAvx512 : kAvx2;
}

const VectorKernels& UsedVectorKernels() {
  static const VectorKernels kernels = Choose();
  return kernels;
}

}  // namespace ipuflow::ops
