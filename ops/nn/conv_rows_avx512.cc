#include "ops/nn/conv_rows_avx512.h"

#include <immintrin.h>

#include <cstddef>

namespace ipuflow::ops::avx512 {
namespace {

#define IPUFLOW_AVX512 \
  __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl")))

constexpr int64_t kPixels = 8;  // Output pixels per ymm.

// Where xp's floats are (see the header): hp rows by sw phases of wq floats
// per input channel. wq covers the last block's 8 lanes, so full loads
// never leave the plane; lanes past ow compute and are not stored.
struct Layout {
  explicit Layout(const ConvRowsShape& s)
      : hp((s.oh - 1) * s.sh + s.kh),
        wq((s.ow + kPixels - 1) / kPixels * kPixels + (s.kw - 1) / s.sw),
        row(s.sw * wq),
        plane(hp * row) {}
  int64_t hp, wq;
  ptrdiff_t row, plane;
};

// In place: r[i] (channel i's pixels 0-7) becomes pixel i's channels 0-7.
IPUFLOW_AVX512 inline void Transpose8(__m256 r[8]) {
  __m256 t[8], u[8];
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
#pragma GCC unroll 2
  for (int i = 0; i < 2; ++i) {
    u[4 * i] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
    u[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0xee);
    u[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
    u[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xee);
  }
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
    r[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
  }
}

// The first `valid` pixels of acc (channel o's 8 pixels in acc[o]) to y,
// oc floats per pixel, 8 channels at a time.
template <int O>
IPUFLOW_AVX512 inline void StorePixels(const __m256* acc, int64_t valid,
                                       int64_t oc, float* y) {
#pragma GCC unroll 4
  for (int g = 0; g < (O + 7) / 8; ++g) {
    __m256 r[8];
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) {
      r[i] = 8 * g + i < O ? acc[8 * g + i] : _mm256_setzero_ps();
    }
    Transpose8(r);
    const int lanes = O - 8 * g < 8 ? O - 8 * g : 8;
    const __mmask8 m = static_cast<__mmask8>((1u << lanes) - 1);
#pragma GCC unroll 8
    for (int p = 0; p < 8; ++p) {
      if (p < valid) _mm256_mask_storeu_ps(y + p * oc + 8 * g, m, r[p]);
    }
  }
}

// Output pixels [ow0, ow0 + valid) of the row whose kh = 0 input row is x0
// (ow0 added): one ymm per channel, the (kh, kw, c) terms in order. (One
// loop over a table of the patch's offsets ran 2% slower on conv2.)
template <int O>
IPUFLOW_AVX512 void Block(const ConvRowsShape& s, const Layout& l,
                          const float* x0, const float* w, int64_t valid,
                          float* y) {
  __m256 acc[O];
#pragma GCC unroll 32
  for (int o = 0; o < O; ++o) acc[o] = _mm256_setzero_ps();
  for (int64_t kh = 0; kh < s.kh; ++kh) {
    const float* xr = x0 + kh * l.row;
    // Column kw of the window: phase kw % sw, kw / sw floats in.
    int64_t phase = 0, q = 0;
    for (int64_t kw = 0; kw < s.kw; ++kw) {
      const float* xc = xr + phase * l.wq + q;
      if (++phase == s.sw) phase = 0, ++q;
      for (int64_t c = 0; c < s.c; ++c, xc += l.plane, w += O) {
        const __m256 xv = _mm256_loadu_ps(xc);
#pragma GCC unroll 32
        for (int o = 0; o < O; ++o) {
          acc[o] = _mm256_fmadd_ps(xv, _mm256_set1_ps(w[o]), acc[o]);
        }
      }
    }
  }
  StorePixels<O>(acc, valid, O, y);
}

// A block of 8 output pixels, consecutive in y from y: lanes `first`
// read x (+ the patch entry's offset), lanes `second` x + next (the next
// output row's first pixels when the block spans two rows), from the
// relaid image; lanes from `valid` on are not stored. `plain`: every lane
// from x, the loads need no masks.
struct BlockAt {
  const float* x;
  ptrdiff_t next;
  __mmask8 first, second;
  int64_t valid;
  float* y;
  bool plain;
};

// Output row oh, shorter than 8 pixels, as a block.
inline BlockAt RowBlock(const ConvRowsShape& s, const Layout& l,
                        const float* xp, int64_t oh, int64_t oc, float* y) {
  return {xp + oh * s.sh * l.row, 0, 0xff, 0, s.ow, y + oh * s.ow * oc, true};
}

// The block of pixels i0 to i0 + 7 of the image (flat index oh * ow + ow,
// up to end), rows of at least 8 pixels: the rest of row i0 / ow, then the
// start of the next one.
inline BlockAt FlatBlock(const ConvRowsShape& s, const Layout& l,
                         const float* xp, int64_t i0, int64_t end, int64_t oc,
                         float* y) {
  const int64_t oh = i0 / s.ow, ow = i0 % s.ow;
  const int64_t first = s.ow - ow < kPixels ? s.ow - ow : kPixels;
  const int64_t valid = end - i0 < kPixels ? end - i0 : kPixels;
  const __mmask8 m = static_cast<__mmask8>((1u << first) - 1);
  return {xp + oh * s.sh * l.row + ow,
          s.sh * l.row - first - ow,
          m,
          static_cast<__mmask8>(valid > first ? ~m : 0),
          valid,
          y + i0 * oc,
          first == kPixels};
}

// Two blocks at once, A in the low and B in the high half of zmm
// accumulators: the same FMAs per lane at half the instructions. Zen 4
// runs the ymm loop with broadcast operands at 90% of its FMA peak, the
// zmm one at 99.6% (a loop of 20 accumulators alone, 105 vs 116 GFLOP/s).
// kSpan: some lanes read the next row (masked loads).
template <int O, bool kSpan>
IPUFLOW_AVX512 void BlockPair(const ConvRowsShape& s, const Layout& l,
                              const BlockAt& a, const BlockAt& b,
                              const float* w) {
  const ptrdiff_t db = b.x - a.x, da2 = a.next, db2 = db + b.next;
  __m512 acc[O];
#pragma GCC unroll 32
  for (int o = 0; o < O; ++o) acc[o] = _mm512_setzero_ps();
  for (int64_t kh = 0; kh < s.kh; ++kh) {
    const float* xr = a.x + kh * l.row;
    int64_t phase = 0, q = 0;
    for (int64_t kw = 0; kw < s.kw; ++kw) {
      const float* xc = xr + phase * l.wq + q;
      if (++phase == s.sw) phase = 0, ++q;
      for (int64_t c = 0; c < s.c; ++c, xc += l.plane, w += O) {
        __m256 lo, hi;
        if constexpr (kSpan) {
          lo = _mm256_mask_loadu_ps(_mm256_maskz_loadu_ps(a.first, xc),
                                    a.second, xc + da2);
          hi = _mm256_mask_loadu_ps(_mm256_maskz_loadu_ps(b.first, xc + db),
                                    b.second, xc + db2);
        } else {
          lo = _mm256_loadu_ps(xc);
          hi = _mm256_loadu_ps(xc + db);
        }
        const __m512 xv = _mm512_insertf32x8(_mm512_castps256_ps512(lo), hi, 1);
#pragma GCC unroll 32
        for (int o = 0; o < O; ++o) {
          acc[o] = _mm512_fmadd_ps(xv, _mm512_set1_ps(w[o]), acc[o]);
        }
      }
    }
  }
  __m256 half[O];
#pragma GCC unroll 32
  for (int o = 0; o < O; ++o) half[o] = _mm512_castps512_ps256(acc[o]);
  StorePixels<O>(half, a.valid, O, a.y);
#pragma GCC unroll 32
  for (int o = 0; o < O; ++o) half[o] = _mm512_extractf32x8_ps(acc[o], 1);
  StorePixels<O>(half, b.valid, O, b.y);
}

// Output rows [oh0, oh1) in blocks of 8 pixels: a block per row if rows are
// shorter, else over the rows' pixels in order, so that only the last
// block can have idle lanes. Blocks go in pairs; an odd last one alone.
template <int O>
IPUFLOW_AVX512 void Rows(const ConvRowsShape& s, const float* xp,
                         const float* w, int64_t oh0, int64_t oh1, float* y) {
  const Layout l(s);
  const bool per_row = s.ow < kPixels;
  const int64_t begin = oh0 * s.ow, end = oh1 * s.ow;
  const int64_t blocks =
      per_row ? oh1 - oh0 : (end - begin + kPixels - 1) / kPixels;
  BlockAt pending{};
  bool has_pending = false;
  for (int64_t i = 0; i < blocks; ++i) {
    const BlockAt at =
        per_row ? RowBlock(s, l, xp, oh0 + i, O, y)
                : FlatBlock(s, l, xp, begin + i * kPixels, end, O, y);
    if (!has_pending) {
      pending = at;
      has_pending = true;
    } else if (pending.plain && at.plain) {
      BlockPair<O, false>(s, l, pending, at, w);
      has_pending = false;
    } else {
      BlockPair<O, true>(s, l, pending, at, w);
      has_pending = false;
    }
  }
  if (!has_pending) return;
  if (pending.plain) {
    return Block<O>(s, l, pending.x, w, pending.valid, pending.y);
  }
  BlockAt none = pending;
  none.valid = 0;
  BlockPair<O, true>(s, l, pending, none, w);
}

}  // namespace

int64_t ConvRowsImageFloats(const ConvRowsShape& s) {
  const Layout l(s);
  return s.c * l.plane;
}

// Stride 1: blocks of 8 pixels by 8 channels, transposed in registers (a
// scalar copy, one store per float, took a tenth of conv2's time; Zen 4's
// gathers as long). Other strides: the scalar copy.
IPUFLOW_AVX512 void ConvRowsRelayout(const ConvRowsShape& s, const float* image,
                                     float* xp) {
  const Layout l(s);
  for (int64_t ih = 0; ih < s.h; ++ih) {
    const int64_t r = ih + s.pad_top;
    if (r >= l.hp) break;  // Rows no window reads.
    const float* row = image + ih * s.w * s.c;
    if (s.sw == 1) {
      float* dst = xp + r * l.wq + s.pad_left;
      const int64_t w = s.w < l.wq - s.pad_left ? s.w : l.wq - s.pad_left;
      for (int64_t iw = 0; iw < w; iw += 8) {
        const int64_t np = w - iw < 8 ? w - iw : 8;
        const __mmask8 pm = static_cast<__mmask8>((1u << np) - 1);
        for (int64_t c = 0; c < s.c; c += 8) {
          const int64_t nc = s.c - c < 8 ? s.c - c : 8;
          const __mmask8 cm = static_cast<__mmask8>((1u << nc) - 1);
          __m256 t[8];
#pragma GCC unroll 8
          for (int i = 0; i < 8; ++i) {
            t[i] = i < np ? _mm256_maskz_loadu_ps(cm, row + (iw + i) * s.c + c)
                          : _mm256_setzero_ps();
          }
          Transpose8(t);
#pragma GCC unroll 8
          for (int j = 0; j < 8; ++j) {
            if (j < nc) {
              _mm256_mask_storeu_ps(dst + (c + j) * l.plane + iw, pm, t[j]);
            }
          }
        }
      }
      continue;
    }
    for (int64_t iw = 0; iw < s.w; ++iw) {
      const int64_t col = iw + s.pad_left;
      const int64_t q = col / s.sw;
      if (q >= l.wq) break;
      float* dst = xp + (r * s.sw + col % s.sw) * l.wq + q;
      const float* src = row + iw * s.c;
      for (int64_t c = 0; c < s.c; ++c) dst[c * l.plane] = src[c];
    }
  }
}

void ConvRowsForward(const ConvRowsShape& s, const float* xp, const float* w,
                     int64_t oh0, int64_t oh1, float* y) {
  switch (s.oc) {
    case 9:
      return Rows<9>(s, xp, w, oh0, oh1, y);
    case 10:
      return Rows<10>(s, xp, w, oh0, oh1, y);
    case 11:
      return Rows<11>(s, xp, w, oh0, oh1, y);
    case 12:
      return Rows<12>(s, xp, w, oh0, oh1, y);
    case 17:
      return Rows<17>(s, xp, w, oh0, oh1, y);
    case 18:
      return Rows<18>(s, xp, w, oh0, oh1, y);
    case 19:
      return Rows<19>(s, xp, w, oh0, oh1, y);
    case 20:
      return Rows<20>(s, xp, w, oh0, oh1, y);
    case 21:
      return Rows<21>(s, xp, w, oh0, oh1, y);
    case 22:
      return Rows<22>(s, xp, w, oh0, oh1, y);
    case 23:
      return Rows<23>(s, xp, w, oh0, oh1, y);
    default:
      return Rows<24>(s, xp, w, oh0, oh1, y);
  }
}

#undef IPUFLOW_AVX512

}  // namespace ipuflow::ops::avx512
