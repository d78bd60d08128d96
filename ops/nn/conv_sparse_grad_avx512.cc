#include "ops/nn/conv_sparse_grad_avx512.h"

#include <immintrin.h>

#include <cstdint>

// Only intrinsics inside (no std templates): an inline function compiled
// here for AVX-512 and emitted out of line could be picked by the linker
// for AVX2 callers. The helpers have internal linkage.
#define IPUFLOW_AVX512 \
  __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl")))

namespace ipuflow::ops {
namespace {

constexpr int kLanes = 16;

// The first min(n, 16) lanes.
inline __mmask16 FirstLanes(int64_t n) {
  return n >= kLanes ? static_cast<__mmask16>(0xffff)
                     : static_cast<__mmask16>((1u << n) - 1);
}
// A block: up to kMaxRows window rows of up to kMaxVectors vectors each,
// at most kMaxAccumulators zmm accumulators (of 32 registers; the rest
// hold the broadcast gradient and loads).
constexpr int kMaxVectors = 8;
constexpr int kMaxRows = 6;
constexpr int kMaxAccumulators = 24;
// Row tails (conv_benchmark's BM_B2_SparseConvGradPooledDy decided):
// the input gradient masks its last vector (an overlapping whole one
// measured the same), the filter gradient overlaps. The filter gradient
// runs on 8-float vectors: its loads of x are unaligned, and on this
// EPYC (Zen 4) a 512-bit one always spans two cache lines: 16-float
// vectors measured 140-151 us against 116.
constexpr bool kInputOverlap = false;
constexpr bool kFilterOverlap = true;
constexpr bool kFilterWide = false;

// The two vector widths Block runs on: 16 floats (zmm) and 8 (ymm, with
// AVX-512VL's masks and 32 registers: the filter gradient's loads of x are
// unaligned, and a 512-bit one always spans two cache lines).
struct Zmm {
  using V = __m512;
  static constexpr int kWidth = 16;
  IPUFLOW_AVX512 static V Load(const float* p) { return _mm512_loadu_ps(p); }
  IPUFLOW_AVX512 static V MaskLoad(__mmask16 m, const float* p) {
    return _mm512_maskz_loadu_ps(m, p);
  }
  IPUFLOW_AVX512 static V Set1(float v) { return _mm512_set1_ps(v); }
  IPUFLOW_AVX512 static V Fma(V a, V b, V c) {
    return _mm512_fmadd_ps(a, b, c);
  }
  IPUFLOW_AVX512 static void Store(float* p, V v) { _mm512_storeu_ps(p, v); }
  IPUFLOW_AVX512 static void MaskStore(float* p, __mmask16 m, V v) {
    _mm512_mask_storeu_ps(p, m, v);
  }
};
struct Ymm {
  using V = __m256;
  static constexpr int kWidth = 8;
  IPUFLOW_AVX512 static V Load(const float* p) { return _mm256_loadu_ps(p); }
  IPUFLOW_AVX512 static V MaskLoad(__mmask16 m, const float* p) {
    return _mm256_maskz_loadu_ps(static_cast<__mmask8>(m), p);
  }
  IPUFLOW_AVX512 static V Set1(float v) { return _mm256_set1_ps(v); }
  IPUFLOW_AVX512 static V Fma(V a, V b, V c) {
    return _mm256_fmadd_ps(a, b, c);
  }
  IPUFLOW_AVX512 static void Store(float* p, V v) { _mm256_storeu_ps(p, v); }
  IPUFLOW_AVX512 static void MaskStore(float* p, __mmask16 m, V v) {
    _mm256_mask_storeu_ps(p, static_cast<__mmask8>(m), v);
  }
};

// dst[g * dst_stride + (0, W (P - 1)) and + last + (0, W)] +=
// sum over t < count of value[t] * src[t][at + g * src_stride + the
// same], for g < G, t in order, one fused multiply-add per term, W =
// Vec::kWidth: P - 1 vectors and a last one at `last` (W (P - 1), or less
// to end the row with a whole vector that overlaps its predecessor: the
// overlapped elements get the same terms in the same order, so both
// stores write the same values). kMasked: the last vector only on the
// lanes of `tail`.
template <typename Vec, int P, int G, bool kMasked>
IPUFLOW_AVX512 void Block(float* dst, int64_t dst_stride,
                          const float* const* src, int64_t at,
                          int64_t src_stride, const float* value, int64_t count,
                          int64_t last, __mmask16 tail) {
  constexpr int W = Vec::kWidth;
  typename Vec::V acc[G][P];
#pragma GCC unroll 8
  for (int g = 0; g < G; ++g) {
#pragma GCC unroll 8
    for (int i = 0; i + 1 < P; ++i) {
      acc[g][i] = Vec::Load(dst + g * dst_stride + i * W);
    }
    const float* d = dst + g * dst_stride + last;
    acc[g][P - 1] = kMasked ? Vec::MaskLoad(tail, d) : Vec::Load(d);
  }
  for (int64_t t = 0; t < count; ++t) {
    const typename Vec::V v = Vec::Set1(value[t]);
    const float* p = src[t] + at;
#pragma GCC unroll 8
    for (int g = 0; g < G; ++g) {
#pragma GCC unroll 8
      for (int i = 0; i + 1 < P; ++i) {
        acc[g][i] =
            Vec::Fma(v, Vec::Load(p + g * src_stride + i * W), acc[g][i]);
      }
      const float* q = p + g * src_stride + last;
      acc[g][P - 1] = Vec::Fma(
          v, kMasked ? Vec::MaskLoad(tail, q) : Vec::Load(q), acc[g][P - 1]);
    }
  }
#pragma GCC unroll 8
  for (int g = 0; g < G; ++g) {
    float* d = dst + g * dst_stride;
    // The last vector first: where it overlaps its predecessor, the
    // predecessor's store is the younger one, whole for the next loads.
    if (kMasked) {
      Vec::MaskStore(d + last, tail, acc[g][P - 1]);
    } else {
      Vec::Store(d + last, acc[g][P - 1]);
    }
#pragma GCC unroll 8
    for (int i = 0; i + 1 < P; ++i) Vec::Store(d + i * W, acc[g][i]);
  }
}

using BlockFn = void (*)(float*, int64_t, const float* const*, int64_t, int64_t,
                         const float*, int64_t, int64_t, __mmask16);
#define IPUFLOW_BLOCKS_OF(V, P, M)                                 \
  {                                                                \
    &Block<V, P, 1, M>, &Block<V, P, 2, M>, &Block<V, P, 3, M>,    \
        &Block<V, P, 4, M>, &Block<V, P, 5, M>, &Block<V, P, 6, M> \
  }
#define IPUFLOW_BLOCKS(V, M)                                    \
  {                                                             \
    IPUFLOW_BLOCKS_OF(V, 1, M), IPUFLOW_BLOCKS_OF(V, 2, M),     \
        IPUFLOW_BLOCKS_OF(V, 3, M), IPUFLOW_BLOCKS_OF(V, 4, M), \
        IPUFLOW_BLOCKS_OF(V, 5, M), IPUFLOW_BLOCKS_OF(V, 6, M), \
        IPUFLOW_BLOCKS_OF(V, 7, M), IPUFLOW_BLOCKS_OF(V, 8, M)  \
  }
// kBlocks[wide][masked][P - 1][G - 1] = Block<wide ? Zmm : Ymm, P, G,
// masked>.
constexpr BlockFn kBlocks[2][2][kMaxVectors][kMaxRows] = {
    {IPUFLOW_BLOCKS(Ymm, false), IPUFLOW_BLOCKS(Ymm, true)},
    {IPUFLOW_BLOCKS(Zmm, false), IPUFLOW_BLOCKS(Zmm, true)}};
#undef IPUFLOW_BLOCKS
#undef IPUFLOW_BLOCKS_OF

// One block of a window's rows: Block<Zmm or Ymm, P, G, masked> at
// dst + dst_at and src[t] + src_at.
struct BlockCall {
  BlockFn fn;
  int64_t dst_at, src_at, last;
  __mmask16 tail;
};

// The blocks that compute dst[k * dst_stride + (0, row)] += sum over
// t < count of value[t] * src[t][k * src_stride + (0, row)] for k < rows:
// with a plan, stored there (at most `capacity`; the count, or -1 if more
// are needed); without, run at once on dst, src, value and count.
// Vectors of 16 floats (`wide`, Zmm) or 8 (Ymm); blocks of up to 8
// vectors along the row and as many rows as fit in 24 accumulators (split
// evenly: 5 rows of 4 vectors are one block, not 4 + 1). A row's tail:
// with `overlap` and a row of at least a vector, a whole vector ending
// the row; else a masked one.
IPUFLOW_AVX512 int Blocks(int64_t dst_stride, int64_t src_stride, int64_t row,
                          int64_t rows, bool overlap, bool wide,
                          BlockCall* plan, int capacity, float* dst,
                          const float* const* src, const float* value,
                          int64_t count) {
  const int64_t lanes = wide ? kLanes : 8, most_floats = kMaxVectors * lanes;
  int n = 0;
  for (int64_t j = 0, r = 0; j < row; j += r) {
    // Blocks of most_floats, but leaving at least a vector for the last
    // (an overlapping vector must not reach into a block already stored).
    r = row - j <= most_floats          ? row - j
        : row - j - most_floats < lanes ? most_floats - lanes
                                        : most_floats;
    const int64_t vectors = (r + lanes - 1) / lanes;
    int64_t last = (vectors - 1) * lanes;
    __mmask16 tail = static_cast<__mmask16>(0xffff);
    bool masked = false;
    if (r % lanes != 0) {
      if (overlap && row >= lanes) {
        last = r - lanes;  // r >= lanes (see above) or row == r >= lanes.
      } else {
        tail = static_cast<__mmask16>((1u << (r - last)) - 1);
        masked = true;
      }
    }
    int64_t most = kMaxAccumulators / vectors;
    most = most > kMaxRows ? kMaxRows : most;
    for (int64_t k = 0; k < rows;) {
      const int64_t left = rows - k, blocks = (left + most - 1) / most;
      const int64_t g = (left + blocks - 1) / blocks;
      const BlockCall b{kBlocks[wide][masked][vectors - 1][g - 1],
                        k * dst_stride + j, k * src_stride + j, last, tail};
      if (plan == nullptr) {
        b.fn(dst + b.dst_at, dst_stride, src, b.src_at, src_stride, value,
             count, b.last, b.tail);
      } else {
        if (n == capacity) return -1;
        plan[n] = b;
      }
      ++n;
      k += g;
    }
  }
  return n;
}

IPUFLOW_AVX512 void AddRows(float* dst, int64_t dst_stride,
                            const float* const* src, int64_t src_stride,
                            const float* value, int64_t count, int64_t row,
                            int64_t rows, bool overlap, bool wide) {
  Blocks(dst_stride, src_stride, row, rows, overlap, wide, nullptr, 0, dst, src,
         value, count);
}

// The nonzero (or NaN) channels of one pixel's gradient, in channel order:
// their count. Up to 64 channels a mask compare per 16 and a walk over the
// set bits, more a branch-free scalar scan (as the AVX2 version).
IPUFLOW_AVX512 inline int NonzeroChannels(const float* d, int64_t oc,
                                          int* channel, float* value) {
  int m = 0;
  if (oc > 64) {
    for (int64_t o = 0; o < oc; ++o) {
      const float v = d[o];
      channel[m] = static_cast<int>(o);
      value[m] = v;
      m += v != 0.0f;
    }
    return m;
  }
  const __m512 zero = _mm512_setzero_ps();
  uint64_t bits = 0;
  for (int64_t o = 0; o < oc; o += kLanes) {
    const int64_t r = oc - o;
    const __mmask16 lanes = FirstLanes(r);
    const __mmask16 ne = _mm512_mask_cmp_ps_mask(
        lanes, _mm512_maskz_loadu_ps(lanes, d + o), zero, _CMP_NEQ_UQ);
    bits |= static_cast<uint64_t>(ne) << o;
  }
  for (; bits != 0; bits &= bits - 1) {
    const int c = __builtin_ctzll(bits);
    channel[m] = c;
    value[m] = d[c];
    ++m;
  }
  return m;
}

}  // namespace

// A pixel's nonzero (or NaN) channels in channel order, for oc <= 64:
// their gradients to value and their filter rows wt + channel * size to
// rows (compressed 16 channels at a time, whole vectors stored: 16
// entries of slack); their count.
IPUFLOW_AVX512 inline int64_t CompressNonzero(const float* d, int64_t oc,
                                              const float* wt, int64_t size,
                                              float* value,
                                              const float** rows) {
  const __m512 zero = _mm512_setzero_ps();
  const __m512i iota = _mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7);
  const __m512i stride = _mm512_set1_epi64(size * 4);  // Bytes per row.
  const __m512i step_lo = _mm512_mullo_epi64(iota, stride);
  const __m512i step_hi =
      _mm512_add_epi64(step_lo, _mm512_slli_epi64(stride, 3));  // + 8 rows.
  int64_t m = 0;
  for (int64_t o = 0; o < oc; o += kLanes) {
    const int64_t r = oc - o;
    const __mmask16 lanes = FirstLanes(r);
    const __m512 x = _mm512_maskz_loadu_ps(lanes, d + o);
    const __mmask16 ne = _mm512_mask_cmp_ps_mask(lanes, x, zero, _CMP_NEQ_UQ);
    if (ne == 0) continue;
    _mm512_storeu_ps(value + m, _mm512_maskz_compress_ps(ne, x));
    const __m512i base =
        _mm512_set1_epi64(reinterpret_cast<int64_t>(wt + o * size));
    const __mmask8 lo = static_cast<__mmask8>(ne & 0xff);
    const __mmask8 hi = static_cast<__mmask8>(ne >> 8);
    const int64_t n_lo = __builtin_popcount(lo);
    _mm512_storeu_si512(rows + m, _mm512_maskz_compress_epi64(
                                      lo, _mm512_add_epi64(base, step_lo)));
    _mm512_storeu_si512(
        rows + m + n_lo,
        _mm512_maskz_compress_epi64(hi, _mm512_add_epi64(base, step_hi)));
    m += n_lo + __builtin_popcount(hi);
  }
  return m;
}

IPUFLOW_AVX512 void SparseConvBackpropInputImageAvx512(
    const SparseConvGradShape& s, const float* dy_image, const float* wt,
    float* dx_image, int* channel, float* value, const float** rows) {
  const int64_t line = s.w * s.c;
  // The blocks of a pixel's window, the same for every pixel.
  constexpr int kPlan = 32;
  BlockCall plan[kPlan];
  const int blocks =
      Blocks(line, s.row_pad, s.row, s.kh, kInputOverlap,
             /*wide=*/true, plan, kPlan, nullptr, nullptr, nullptr, 0);
  // Down the columns, as the AVX2 loop (conv_sparse_grad.cc says why).
  for (int64_t ox = 0; ox < s.ow; ++ox) {
    for (int64_t oy = 0; oy < s.oh; ++oy) {
      const float* d = dy_image + (oy * s.ow + ox) * s.oc;
      int64_t m;
      if (s.oc <= 64) {
        m = CompressNonzero(d, s.oc, wt, s.size, value, rows);
      } else {
        m = NonzeroChannels(d, s.oc, channel, value);
        for (int64_t i = 0; i < m; ++i) rows[i] = wt + channel[i] * s.size;
      }
      if (m == 0) continue;
      float* base = dx_image + (oy * s.sh * s.w + ox * s.sw) * s.c;
      if (blocks < 0) {
        AddRows(base, line, rows, s.row_pad, value, m, s.row, s.kh,
                kInputOverlap, /*wide=*/true);
        continue;
      }
      for (int i = 0; i < blocks; ++i) {
        const BlockCall& b = plan[i];
        b.fn(base + b.dst_at, line, rows, b.src_at, s.row_pad, value, m, b.last,
             b.tail);
      }
    }
  }
}

IPUFLOW_AVX512 void SparseConvBackpropFilterImageAvx512(
    const SparseConvGradShape& s, const float* x_image, const float* dy_image,
    float* sum, const float** window, const float** src, float* value,
    int64_t* count) {
  const int64_t pixels = s.oh * s.ow, line = s.w * s.c;
  for (int64_t oy = 0; oy < s.oh; ++oy) {
    for (int64_t ox = 0; ox < s.ow; ++ox) {
      window[oy * s.ow + ox] = x_image + (oy * s.sh * s.w + ox * s.sw) * s.c;
    }
  }
  // Per channel, its nonzero pixels in order: each pixel's nonzero
  // channels (a mask compare) appended to their channels' lists.
  for (int64_t o = 0; o < s.oc; ++o) count[o] = 0;
  const __m512 zero = _mm512_setzero_ps();
  for (int64_t p = 0; p < pixels; ++p) {
    const float* d = dy_image + p * s.oc;
    for (int64_t o0 = 0; o0 < s.oc; o0 += kLanes) {
      const int64_t r = s.oc - o0;
      const __mmask16 lanes = FirstLanes(r);
      uint32_t bits = _mm512_mask_cmp_ps_mask(
          lanes, _mm512_maskz_loadu_ps(lanes, d + o0), zero, _CMP_NEQ_UQ);
      for (; bits != 0; bits &= bits - 1) {
        const int64_t o = o0 + __builtin_ctz(bits), k = o * pixels + count[o]++;
        src[k] = window[p];
        value[k] = d[o];
      }
    }
  }
  // The blocks of a channel's window, the same for every channel.
  constexpr int kPlan = 32;
  BlockCall plan[kPlan];
  const int blocks =
      Blocks(s.row_pad, line, s.row, s.kh, kFilterOverlap, kFilterWide, plan,
             kPlan, nullptr, nullptr, nullptr, 0);
  for (int64_t o = 0; o < s.oc; ++o) {
    if (count[o] == 0) continue;
    float* dst = sum + o * s.size;
    const float* const* list = src + o * pixels;
    if (blocks < 0) {
      AddRows(dst, s.row_pad, list, line, value + o * pixels, count[o], s.row,
              s.kh, kFilterOverlap, kFilterWide);
      continue;
    }
    for (int i = 0; i < blocks; ++i) {
      const BlockCall& b = plan[i];
      b.fn(dst + b.dst_at, s.row_pad, list, b.src_at, line, value + o * pixels,
           count[o], b.last, b.tail);
    }
  }
}

IPUFLOW_AVX512 double NonzeroFractionAvx512(const float* dy, int64_t n) {
  if (n <= 0) return 0;
  const __m512 zero = _mm512_setzero_ps();
  int64_t count = 0, i = 0;
  for (; i + 2 * kLanes <= n; i += 2 * kLanes) {
    // NaN != 0 too: a NaN gradient is never skipped.
    const __mmask16 a =
        _mm512_cmp_ps_mask(_mm512_loadu_ps(dy + i), zero, _CMP_NEQ_UQ);
    const __mmask16 b =
        _mm512_cmp_ps_mask(_mm512_loadu_ps(dy + i + kLanes), zero, _CMP_NEQ_UQ);
    count += __builtin_popcount((static_cast<uint32_t>(b) << 16) | a);
  }
  for (; i < n; i += kLanes) {
    const int64_t r = n - i;
    const __mmask16 lanes = FirstLanes(r);
    count += __builtin_popcount(_mm512_mask_cmp_ps_mask(
        lanes, _mm512_maskz_loadu_ps(lanes, dy + i), zero, _CMP_NEQ_UQ));
  }
  return static_cast<double>(count) / n;
}

}  // namespace ipuflow::ops
