#include "ops/nn/conv_small_avx512.h"

#include <immintrin.h>

namespace ipuflow::ops::avx512 {
namespace {

#define IPUFLOW_AVX512 \
  __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl")))

// A pixel's channels: Z zmm registers (channels [16 v, 16 v + 16)), then,
// with kY, one ymm (channels [16 Z, 16 Z + 8)). The last register is
// masked to the oc channels.
//
// Register blocking (AVX-512 has 32 registers): forward, P pixels per pass
// over the patch, each weight register loaded once for all P; filter, G
// patch entries per pass over the pixels, each dy register loaded once for
// all G. From conv_benchmark on the 2-vCPU EPYC, a Zen 4 (one thread): forward
// P = 6 beat 8 and 12 (12 pointers no longer fit the general registers)
// for 10 channels and tied for 20; filter G = 6 beat 8 and 12 for 20.
constexpr int ForwardPixels(int registers) { return 6; }
constexpr int FilterEntries(int registers) { return registers == 1 ? 12 : 6; }

// How the loops find pixels: listed one by one (border patches), or as a
// run of one output row (interior: pixel i at src + i * step).
struct ListedPixels {
  const float* const* src;
  const int64_t* pixel;
  IPUFLOW_AVX512 const float* Src(int64_t i) const { return src[i]; }
  IPUFLOW_AVX512 int64_t Pixel(int64_t i) const { return pixel[i]; }
  IPUFLOW_AVX512 ListedPixels From(int64_t i) const {
    return {src + i, pixel + i};
  }
};
struct RunPixels {
  const float* src;
  ptrdiff_t step;
  int64_t pixel;
  IPUFLOW_AVX512 const float* Src(int64_t i) const { return src + i * step; }
  IPUFLOW_AVX512 int64_t Pixel(int64_t i) const { return pixel + i; }
  IPUFLOW_AVX512 RunPixels From(int64_t i) const {
    return {src + i * step, step, pixel + i};
  }
};

// The masks of the last zmm (lanes [16 (Z - 1), oc)) and of the ymm (lanes
// [16 Z, oc)).
struct Masks {
  __mmask16 z;
  __mmask8 y;
};

template <int Z, bool kY>
Masks MasksFor(int64_t oc) {
  const int64_t last = kY ? oc - 16 * Z : oc - 16 * (Z - 1);
  const unsigned bits = last >= 16 ? 0xffffu : (1u << last) - 1;
  return kY ? Masks{0xffff, static_cast<__mmask8>(bits)}
            : Masks{static_cast<__mmask16>(bits), 0};
}

template <int Z, bool kY, int P, typename S>
IPUFLOW_AVX512 void ForwardBlock(S s, const ptrdiff_t* off, int64_t k,
                                 const float* w, int64_t oc, Masks m,
                                 float* y) {
  constexpr int L = 16 * Z + (kY ? 8 : 0);
  constexpr int ZA = Z > 0 ? Z : 1;  // No zero-length arrays.
  __m512 acc[P][ZA];
  __m256 acy[P];
#pragma GCC unroll 16
  for (int i = 0; i < P; ++i) {
#pragma GCC unroll 2
    for (int v = 0; v < Z; ++v) acc[i][v] = _mm512_setzero_ps();
    acy[i] = _mm256_setzero_ps();
  }
  for (int64_t j = 0; j < k; ++j, w += L) {
    __m512 wz[ZA];
#pragma GCC unroll 2
    for (int v = 0; v < Z; ++v) wz[v] = _mm512_loadu_ps(w + 16 * v);
    const __m256 wy = kY ? _mm256_loadu_ps(w + 16 * Z) : _mm256_setzero_ps();
    const ptrdiff_t o = off[j];
#pragma GCC unroll 16
    for (int i = 0; i < P; ++i) {
      if constexpr (Z > 0) {
        const __m512 xi = _mm512_set1_ps(s.Src(i)[o]);
#pragma GCC unroll 2
        for (int v = 0; v < Z; ++v) {
          acc[i][v] = _mm512_fmadd_ps(xi, wz[v], acc[i][v]);
        }
        if constexpr (kY) {
          acy[i] = _mm256_fmadd_ps(_mm512_castps512_ps256(xi), wy, acy[i]);
        }
      } else {
        acy[i] = _mm256_fmadd_ps(_mm256_set1_ps(s.Src(i)[o]), wy, acy[i]);
      }
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < P; ++i) {
    float* yi = y + s.Pixel(i) * oc;
#pragma GCC unroll 2
    for (int v = 0; v < Z; ++v) {
      if (!kY && v == Z - 1) {
        _mm512_mask_storeu_ps(yi + 16 * v, m.z, acc[i][v]);
      } else {
        _mm512_storeu_ps(yi + 16 * v, acc[i][v]);
      }
    }
    if constexpr (kY) _mm256_mask_storeu_ps(yi + 16 * Z, m.y, acy[i]);
  }
}

// The last `left` (< P) pixels of a set.
template <int Z, bool kY, int P, typename S>
IPUFLOW_AVX512 void ForwardTail(int64_t left, S s, const ptrdiff_t* off,
                                int64_t k, const float* w, int64_t oc, Masks m,
                                float* y) {
  if constexpr (P > 0) {
    if (left == P) return ForwardBlock<Z, kY, P>(s, off, k, w, oc, m, y);
    ForwardTail<Z, kY, P - 1>(left, s, off, k, w, oc, m, y);
  }
}

template <int Z, bool kY, typename S>
IPUFLOW_AVX512 void ForwardSet(S s, int64_t count, const ptrdiff_t* off,
                               int64_t k, const float* w, int64_t oc,
                               float* y) {
  constexpr int P = ForwardPixels(Z + (kY ? 1 : 0));
  const Masks m = MasksFor<Z, kY>(oc);
  int64_t i = 0;
  for (; i + P <= count; i += P) {
    ForwardBlock<Z, kY, P>(s.From(i), off, k, w, oc, m, y);
  }
  ForwardTail<Z, kY, P - 1>(count - i, s.From(i), off, k, w, oc, m, y);
}

template <typename S>
IPUFLOW_AVX512 void ForwardAny(S s, int64_t count, const ptrdiff_t* off,
                               int64_t k, const float* w, int64_t oc,
                               float* y) {
  switch (SmallConvPackedWidth(oc)) {
    case 8:
      return ForwardSet<0, true>(s, count, off, k, w, oc, y);
    case 16:
      return ForwardSet<1, false>(s, count, off, k, w, oc, y);
    case 24:
      return ForwardSet<1, true>(s, count, off, k, w, oc, y);
    default:
      return ForwardSet<2, false>(s, count, off, k, w, oc, y);
  }
}

// The dy rows of a set: pixel p's at dy + (p - pixel0) * stride.
struct DyRows {
  const float* dy;
  int64_t stride, pixel0;
};

// Over the pixels of segments [0, segments) in order, count[q] of seg[q].
template <int Z, bool kY, int G, typename S>
IPUFLOW_AVX512 void FilterBlock(const S* seg, const int64_t* count,
                                int64_t segments, const ptrdiff_t* off,
                                const DyRows& d, Masks m, float* sum) {
  constexpr int L = 16 * Z + (kY ? 8 : 0);
  constexpr int ZA = Z > 0 ? Z : 1;
  __m512 acc[G][ZA];
  __m256 acy[G];
#pragma GCC unroll 16
  for (int j = 0; j < G; ++j) {
#pragma GCC unroll 2
    for (int v = 0; v < Z; ++v)
      acc[j][v] = _mm512_loadu_ps(sum + j * L + 16 * v);
    acy[j] = kY ? _mm256_loadu_ps(sum + j * L + 16 * Z) : _mm256_setzero_ps();
  }
  for (int64_t q = 0; q < segments; ++q) {
    const S px = seg[q];
    for (int64_t i = 0; i < count[q]; ++i) {
      const float* dy = d.dy + (px.Pixel(i) - d.pixel0) * d.stride;
      // Masked: the lanes past oc read nothing (no fault past dy's end).
      __m512 dz[ZA];
#pragma GCC unroll 2
      for (int v = 0; v < Z; ++v) {
        dz[v] = !kY && v == Z - 1 ? _mm512_maskz_loadu_ps(m.z, dy + 16 * v)
                                  : _mm512_loadu_ps(dy + 16 * v);
      }
      const __m256 dyy =
          kY ? _mm256_maskz_loadu_ps(m.y, dy + 16 * Z) : _mm256_setzero_ps();
      const float* s = px.Src(i);
#pragma GCC unroll 16
      for (int j = 0; j < G; ++j) {
        if constexpr (Z > 0) {
          const __m512 xj = _mm512_set1_ps(s[off[j]]);
#pragma GCC unroll 2
          for (int v = 0; v < Z; ++v) {
            acc[j][v] = _mm512_fmadd_ps(xj, dz[v], acc[j][v]);
          }
          if constexpr (kY) {
            acy[j] = _mm256_fmadd_ps(_mm512_castps512_ps256(xj), dyy, acy[j]);
          }
        } else {
          acy[j] = _mm256_fmadd_ps(_mm256_set1_ps(s[off[j]]), dyy, acy[j]);
        }
      }
    }
  }
#pragma GCC unroll 16
  for (int j = 0; j < G; ++j) {
#pragma GCC unroll 2
    for (int v = 0; v < Z; ++v)
      _mm512_storeu_ps(sum + j * L + 16 * v, acc[j][v]);
    if constexpr (kY) _mm256_storeu_ps(sum + j * L + 16 * Z, acy[j]);
  }
}

// The last `left` (< G) patch entries.
template <int Z, bool kY, int G, typename S>
IPUFLOW_AVX512 void FilterTail(int64_t left, const S* seg, const int64_t* count,
                               int64_t segments, const ptrdiff_t* off,
                               const DyRows& d, Masks m, float* sum) {
  if constexpr (G > 0) {
    if (left == G) {
      return FilterBlock<Z, kY, G>(seg, count, segments, off, d, m, sum);
    }
    FilterTail<Z, kY, G - 1>(left, seg, count, segments, off, d, m, sum);
  }
}

template <int Z, bool kY, typename S>
IPUFLOW_AVX512 void FilterSet(const S* seg, const int64_t* count,
                              int64_t segments, const ptrdiff_t* off, int64_t k,
                              const DyRows& d, int64_t oc, float* sum) {
  constexpr int L = 16 * Z + (kY ? 8 : 0);
  constexpr int G = FilterEntries(Z + (kY ? 1 : 0));
  const Masks m = MasksFor<Z, kY>(oc);
  int64_t j = 0;
  for (; j + G <= k; j += G) {
    FilterBlock<Z, kY, G>(seg, count, segments, off + j, d, m, sum + j * L);
  }
  FilterTail<Z, kY, G - 1>(k - j, seg, count, segments, off + j, d, m,
                           sum + j * L);
}

template <typename S>
IPUFLOW_AVX512 void FilterAny(const S* seg, const int64_t* count,
                              int64_t segments, const ptrdiff_t* off, int64_t k,
                              const DyRows& d, int64_t oc, float* sum) {
  switch (SmallConvPackedWidth(oc)) {
    case 8:
      return FilterSet<0, true>(seg, count, segments, off, k, d, oc, sum);
    case 16:
      return FilterSet<1, false>(seg, count, segments, off, k, d, oc, sum);
    case 24:
      return FilterSet<1, true>(seg, count, segments, off, k, d, oc, sum);
    default:
      return FilterSet<2, false>(seg, count, segments, off, k, d, oc, sum);
  }
}

#undef IPUFLOW_AVX512

}  // namespace

void SmallConvForwardSet(const float* const* src, const int64_t* pixel,
                         int64_t count, const ptrdiff_t* off, int64_t k,
                         const float* w, int64_t oc, float* y) {
  ForwardAny(ListedPixels{src, pixel}, count, off, k, w, oc, y);
}

void SmallConvForwardRun(const float* src, ptrdiff_t step, int64_t pixel0,
                         int64_t count, const ptrdiff_t* off, int64_t k,
                         const float* w, int64_t oc, float* y) {
  ForwardAny(RunPixels{src, step, pixel0}, count, off, k, w, oc, y);
}

void SmallConvFilterSet(const float* const* src, const int64_t* pixel,
                        int64_t count, const ptrdiff_t* off, int64_t k,
                        const float* dy, int64_t dy_stride, int64_t pixel0,
                        int64_t oc, float* sum) {
  if (count == 0) return;
  const ListedPixels all{src, pixel};
  FilterAny(&all, &count, 1, off, k, DyRows{dy, dy_stride, pixel0}, oc, sum);
}

void SmallConvFilterRuns(const float* const* run_src, ptrdiff_t step,
                         const int64_t* run_pixel, const int64_t* run_count,
                         int64_t runs, const ptrdiff_t* off, int64_t k,
                         const float* dy, int64_t dy_stride, int64_t pixel0,
                         int64_t oc, float* sum) {
  // Up to kMaxRuns runs a call (the segments live on the stack: no std
  // containers in this file).
  constexpr int64_t kMaxRuns = 64;
  RunPixels seg[kMaxRuns];
  const DyRows d{dy, dy_stride, pixel0};
  for (int64_t r0 = 0; r0 < runs; r0 += kMaxRuns) {
    const int64_t n = runs - r0 < kMaxRuns ? runs - r0 : kMaxRuns;
    for (int64_t r = 0; r < n; ++r) {
      seg[r] = RunPixels{run_src[r0 + r], step, run_pixel[r0 + r]};
    }
    FilterAny(seg, run_count + r0, n, off, k, d, oc, sum);
  }
}

}  // namespace ipuflow::ops::avx512
