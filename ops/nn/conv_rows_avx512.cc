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

// Block for two blocks of 8 pixels at once, A (from xa) in the low and B
// (from xa + b) in the high half of zmm accumulators: the same FMAs per
// lane at half the instructions. Zen 4 runs the ymm loop with broadcast
// operands at 90% of its FMA peak, the zmm one at 99.6% (a loop of 20
// accumulators alone, 105 vs 116 GFLOP/s).
template <int O>
IPUFLOW_AVX512 void BlockPair(const ConvRowsShape& s, const Layout& l,
                              const float* xa, ptrdiff_t b, const float* w,
                              int64_t valid_a, int64_t valid_b, float* ya,
                              float* yb) {
  __m512 acc[O];
#pragma GCC unroll 32
  for (int o = 0; o < O; ++o) acc[o] = _mm512_setzero_ps();
  for (int64_t kh = 0; kh < s.kh; ++kh) {
    const float* xr = xa + kh * l.row;
    int64_t phase = 0, q = 0;
    for (int64_t kw = 0; kw < s.kw; ++kw) {
      const float* xc = xr + phase * l.wq + q;
      if (++phase == s.sw) phase = 0, ++q;
      for (int64_t c = 0; c < s.c; ++c, xc += l.plane, w += O) {
        const __m512 xv = _mm512_insertf32x8(
            _mm512_castps256_ps512(_mm256_loadu_ps(xc)),
            _mm256_loadu_ps(xc + b), 1);
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
  StorePixels<O>(half, valid_a, O, ya);
#pragma GCC unroll 32
  for (int o = 0; o < O; ++o) half[o] = _mm512_extractf32x8_ps(acc[o], 1);
  StorePixels<O>(half, valid_b, O, yb);
}

// The rows' blocks of 8 pixels in pairs (across rows too), the last one
// alone if their number is odd.
template <int O>
IPUFLOW_AVX512 void Rows(const ConvRowsShape& s, const float* xp,
                         const float* w, int64_t oh0, int64_t oh1, float* y) {
  const Layout l(s);
  const float* pending = nullptr;  // Block A of the next pair, if any.
  int64_t pending_valid = 0;
  float* pending_y = nullptr;
  for (int64_t oh = oh0; oh < oh1; ++oh) {
    const float* xr = xp + oh * s.sh * l.row;
    for (int64_t ow0 = 0; ow0 < s.ow; ow0 += kPixels) {
      const int64_t valid = s.ow - ow0 < kPixels ? s.ow - ow0 : kPixels;
      float* yb = y + (oh * s.ow + ow0) * O;
      if (pending == nullptr) {
        pending = xr + ow0;
        pending_valid = valid;
        pending_y = yb;
        continue;
      }
      BlockPair<O>(s, l, pending, xr + ow0 - pending, w, pending_valid, valid,
                   pending_y, yb);
      pending = nullptr;
    }
  }
  if (pending != nullptr) {
    Block<O>(s, l, pending, w, pending_valid, pending_y);
  }
}

}  // namespace

int64_t ConvRowsImageFloats(const ConvRowsShape& s) {
  const Layout l(s);
  return s.c * l.plane;
}

// Stride 1: blocks of 8 pixels by 8 channels, transposed in registers (a
// scalar copy, one store per float, took a tenth of conv2's time; Zen 4's
// gathers as long). Other strides: the scalar copy.
IPUFLOW_AVX512 void ConvRowsRelayout(const ConvRowsShape& s,
                                     const float* image, float* xp) {
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
