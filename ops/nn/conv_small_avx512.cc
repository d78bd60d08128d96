#include "ops/nn/conv_small_avx512.h"

#include <immintrin.h>

namespace ipuflow::ops::avx512 {
namespace {

#define IPUFLOW_AVX512 \
  __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl")))

constexpr int kLanes = kSmallConvLanes;

// Register blocking over AVX-512's 32 registers (conv_benchmark, Zen 5):
// forward, P pixels of V-register outputs per pass over the patch, each
// weight register loaded once for all P; filter, G patch entries of
// V-register sums per pass over the pixels, each dy register loaded once
// for all G.
constexpr int ForwardPixels(int v) { return v == 1 ? 8 : 6; }
constexpr int FilterEntries(int v) { return v == 1 ? 12 : 8; }

// Lanes [0, oc - 16 * (V - 1)) of the last register.
IPUFLOW_AVX512 inline __mmask16 TailMask(int64_t oc, int v) {
  const int64_t n = oc - kLanes * (v - 1);
  return static_cast<__mmask16>(n >= kLanes ? 0xffff : (1u << n) - 1);
}

template <int V, int P>
IPUFLOW_AVX512 void ForwardBlock(const float* const* src,
                                 const int64_t* pixel, const ptrdiff_t* off,
                                 int64_t k, const float* w, int64_t oc,
                                 __mmask16 tail, float* y) {
  __m512 acc[P][V];
#pragma GCC unroll 8
  for (int i = 0; i < P; ++i) {
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) acc[i][v] = _mm512_setzero_ps();
  }
  for (int64_t j = 0; j < k; ++j, w += V * kLanes) {
    __m512 wj[V];
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) wj[v] = _mm512_loadu_ps(w + v * kLanes);
    const ptrdiff_t o = off[j];
#pragma GCC unroll 8
    for (int i = 0; i < P; ++i) {
      const __m512 xi = _mm512_set1_ps(src[i][o]);
#pragma GCC unroll 2
      for (int v = 0; v < V; ++v) {
        acc[i][v] = _mm512_fmadd_ps(xi, wj[v], acc[i][v]);
      }
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < P; ++i) {
    float* yi = y + pixel[i] * oc;
#pragma GCC unroll 2
    for (int v = 0; v + 1 < V; ++v) _mm512_storeu_ps(yi + v * kLanes, acc[i][v]);
    _mm512_mask_storeu_ps(yi + (V - 1) * kLanes, tail, acc[i][V - 1]);
  }
}

template <int V>
IPUFLOW_AVX512 void ForwardSet(const float* const* src, const int64_t* pixel,
                               int64_t count, const ptrdiff_t* off, int64_t k,
                               const float* w, int64_t oc, float* y) {
  constexpr int P = ForwardPixels(V);
  const __mmask16 tail = TailMask(oc, V);
  int64_t i = 0;
  for (; i + P <= count; i += P) {
    ForwardBlock<V, P>(src + i, pixel + i, off, k, w, oc, tail, y);
  }
  for (; i < count; ++i) {
    ForwardBlock<V, 1>(src + i, pixel + i, off, k, w, oc, tail, y);
  }
}

// The dy rows of a set: pixel p's at dy + (p - pixel0) * stride.
struct DyRows {
  const float* dy;
  int64_t stride, pixel0;
};

template <int V, int G>
IPUFLOW_AVX512 void FilterBlock(const float* const* src, const int64_t* pixel,
                                int64_t count, const ptrdiff_t* off,
                                const DyRows& d, __mmask16 tail, float* sum) {
  __m512 acc[G][V];
#pragma GCC unroll 16
  for (int j = 0; j < G; ++j) {
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) {
      acc[j][v] = _mm512_loadu_ps(sum + (j * V + v) * kLanes);
    }
  }
  for (int64_t i = 0; i < count; ++i) {
    const float* dy = d.dy + (pixel[i] - d.pixel0) * d.stride;
    __m512 dv[V];
#pragma GCC unroll 2
    for (int v = 0; v + 1 < V; ++v) dv[v] = _mm512_loadu_ps(dy + v * kLanes);
    // Masked: the lanes past oc read nothing (no fault past dy's end).
    dv[V - 1] = _mm512_maskz_loadu_ps(tail, dy + (V - 1) * kLanes);
    const float* s = src[i];
#pragma GCC unroll 16
    for (int j = 0; j < G; ++j) {
      const __m512 xj = _mm512_set1_ps(s[off[j]]);
#pragma GCC unroll 2
      for (int v = 0; v < V; ++v) {
        acc[j][v] = _mm512_fmadd_ps(xj, dv[v], acc[j][v]);
      }
    }
  }
#pragma GCC unroll 16
  for (int j = 0; j < G; ++j) {
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) {
      _mm512_storeu_ps(sum + (j * V + v) * kLanes, acc[j][v]);
    }
  }
}

// The last `left` (< G) patch entries.
template <int V, int G>
IPUFLOW_AVX512 void FilterTail(int64_t left, const float* const* src,
                               const int64_t* pixel, int64_t count,
                               const ptrdiff_t* off, const DyRows& d,
                               __mmask16 tail, float* sum) {
  if constexpr (G > 0) {
    if (left == G) {
      return FilterBlock<V, G>(src, pixel, count, off, d, tail, sum);
    }
    FilterTail<V, G - 1>(left, src, pixel, count, off, d, tail, sum);
  }
}

template <int V>
IPUFLOW_AVX512 void FilterSet(const float* const* src, const int64_t* pixel,
                              int64_t count, const ptrdiff_t* off, int64_t k,
                              const DyRows& d, int64_t oc, float* sum) {
  constexpr int G = FilterEntries(V);
  const __mmask16 tail = TailMask(oc, V);
  int64_t j = 0;
  for (; j + G <= k; j += G) {
    FilterBlock<V, G>(src, pixel, count, off + j, d, tail,
                      sum + j * V * kLanes);
  }
  FilterTail<V, G - 1>(k - j, src, pixel, count, off + j, d, tail,
                       sum + j * V * kLanes);
}

#undef IPUFLOW_AVX512

}  // namespace

void SmallConvForwardSet(const float* const* src, const int64_t* pixel,
                         int64_t count, const ptrdiff_t* off, int64_t k,
                         const float* w, int64_t oc, float* y) {
  if (SmallConvRegisters(oc) == 1) {
    ForwardSet<1>(src, pixel, count, off, k, w, oc, y);
  } else {
    ForwardSet<2>(src, pixel, count, off, k, w, oc, y);
  }
}

void SmallConvFilterSet(const float* const* src, const int64_t* pixel,
                        int64_t count, const ptrdiff_t* off, int64_t k,
                        const float* dy, int64_t dy_stride, int64_t pixel0,
                        int64_t oc, float* sum) {
  if (count == 0) return;
  const DyRows d{dy, dy_stride, pixel0};
  if (SmallConvRegisters(oc) == 1) {
    FilterSet<1>(src, pixel, count, off, k, d, oc, sum);
  } else {
    FilterSet<2>(src, pixel, count, off, k, d, oc, sum);
  }
}

}  // namespace ipuflow::ops::avx512
