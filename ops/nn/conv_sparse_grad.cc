#include "ops/nn/conv_sparse_grad.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/cpu_isa.h"
#include "core/thread_pool.h"
#include "ops/nn/conv_sparse_grad_avx512.h"

namespace ipuflow::ops {
namespace {

// AVX2 packets: the build's baseline (x86-64-v3); the AVX-512 loops are in
// conv_sparse_grad_avx512.cc.
constexpr int64_t kSparseLanes = 8;

// Lanes [0, r) set, for the tail of a row.
__m256i TailMask(int64_t r) {
  alignas(32) static const int32_t kTable[16] = {-1, -1, -1, -1, -1, -1, -1, -1,
                                                 0,  0,  0,  0,  0,  0,  0,  0};
  return _mm256_loadu_si256(
      reinterpret_cast<const __m256i*>(kTable + kSparseLanes - r));
}

// The nonzero channels of one output pixel's gradient: their count. Up
// to 64 channels, a packet compare per 8 channels and a walk over the set
// bits (one mispredicted branch per pixel, where a branch per channel
// mispredicts on every other one); more, a branch-free scalar scan.
inline int NonzeroChannels(const float* d, int64_t oc, int* channel,
                           float* value) {
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
  const __m256 zero = _mm256_setzero_ps();
  uint64_t bits = 0;
  int64_t o = 0;
  for (; o + kSparseLanes <= oc; o += kSparseLanes) {
    const __m256 ne = _mm256_cmp_ps(_mm256_loadu_ps(d + o), zero, _CMP_NEQ_UQ);
    bits |= static_cast<uint64_t>(_mm256_movemask_ps(ne)) << o;
  }
  if (o < oc) {  // Masked-off lanes load as zeros.
    const __m256 ne = _mm256_cmp_ps(_mm256_maskload_ps(d + o, TailMask(oc - o)),
                                    zero, _CMP_NEQ_UQ);
    bits |= static_cast<uint64_t>(_mm256_movemask_ps(ne)) << o;
  }
  for (; bits != 0; bits &= bits - 1) {
    const int c = __builtin_ctzll(bits);
    channel[m] = c;
    value[m] = d[c];
    ++m;
  }
  return m;
}

// One image's geometry and the kernels' patch layout
// (conv_sparse_grad_avx512.h): a filter (or filter gradient) channel as
// kh window rows (kw * c floats, HWIO order), each padded to whole packets
// so that a row's packets line up with the input row they multiply (kw * c
// contiguous floats in NHWC).
SparseConvGradShape ShapeOf(const Window2D& g, int64_t oc, int64_t align) {
  const int64_t row = g.kw * g.c, row_pad = (row + align - 1) / align * align;
  return {g.h,  g.w,  g.c, g.kh, g.kw,    g.sh,          g.sw,
          g.oh, g.ow, oc,  row,  row_pad, g.kh * row_pad};
}

// Cycles per image for ThreadPool's split rule: the dense multiply-adds at
// the largest density the sparse path takes, about 16 per cycle. The same
// for both ISAs, so that the filter gradient's shards (and the order of
// its sums) are too.
double CyclesPerImage(const Window2D& g, int64_t oc) {
  return static_cast<double>(g.oh) * g.ow * g.kh * g.kw * g.c * oc *
         kSparseConvGradMaxDensity / 16;
}

// sum[0, row) += value[t] * src[t][at + (0, row)] over t < count, P
// packets of sum in registers from `packet` on (sum has row_pad floats; a
// last packet past `row` reads nothing beyond it).
template <int P>
void AccumulatePackets(const float* const* src, int64_t at, const float* value,
                       int64_t count, int64_t row, int64_t packet, float* sum) {
  const int64_t j0 = packet * kSparseLanes;
  // Fully unrolled (-O2 does not), so that acc lives in registers.
  __m256 acc[P];
#pragma GCC unroll 8
  for (int i = 0; i < P; ++i)
    acc[i] = _mm256_loadu_ps(sum + j0 + i * kSparseLanes);
  const bool partial = j0 + P * kSparseLanes > row;
  if (!partial) {
    for (int64_t t = 0; t < count; ++t) {
      const __m256 v = _mm256_set1_ps(value[t]);
      const float* p = src[t] + at + j0;
#pragma GCC unroll 8
      for (int i = 0; i < P; ++i) {
        acc[i] =
            _mm256_fmadd_ps(v, _mm256_loadu_ps(p + i * kSparseLanes), acc[i]);
      }
    }
  } else {
    const __m256i mask = TailMask(row - (j0 + (P - 1) * kSparseLanes));
    for (int64_t t = 0; t < count; ++t) {
      const __m256 v = _mm256_set1_ps(value[t]);
      const float* p = src[t] + at + j0;
#pragma GCC unroll 8
      for (int i = 0; i + 1 < P; ++i) {
        acc[i] =
            _mm256_fmadd_ps(v, _mm256_loadu_ps(p + i * kSparseLanes), acc[i]);
      }
      acc[P - 1] = _mm256_fmadd_ps(
          v, _mm256_maskload_ps(p + (P - 1) * kSparseLanes, mask), acc[P - 1]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < P; ++i)
    _mm256_storeu_ps(sum + j0 + i * kSparseLanes, acc[i]);
}

// One window row of one channel's filter gradient: tiles of up to 8
// packets in registers, each tile one pass over the channel's pixels.
void AccumulateRow(const float* const* src, int64_t at, const float* value,
                   int64_t count, int64_t row, int64_t row_pad, float* sum) {
  const int64_t packets = row_pad / kSparseLanes;
  int64_t p = 0;
  for (; p + 8 <= packets; p += 8) {
    AccumulatePackets<8>(src, at, value, count, row, p, sum);
  }
  switch (packets - p) {
    case 7:
      return AccumulatePackets<7>(src, at, value, count, row, p, sum);
    case 6:
      return AccumulatePackets<6>(src, at, value, count, row, p, sum);
    case 5:
      return AccumulatePackets<5>(src, at, value, count, row, p, sum);
    case 4:
      return AccumulatePackets<4>(src, at, value, count, row, p, sum);
    case 3:
      return AccumulatePackets<3>(src, at, value, count, row, p, sum);
    case 2:
      return AccumulatePackets<2>(src, at, value, count, row, p, sum);
    case 1:
      return AccumulatePackets<1>(src, at, value, count, row, p, sum);
    default:
      return;
  }
}

// dst[0, row) += sum over t < m of value[t] * rows[t][at + (0, row)]:
// four packets per pass in registers, the tail scalar (AVX2's masked store
// is microcoded on AMD's cores, and a packet load over the tail would
// straddle the previous pixel's narrower stores). The tail fuses its
// multiply-adds too (std::fma is one instruction with FMA), as the
// AVX-512 loops' masked vectors do: both paths round alike.
inline void AddRow(float* dst, const float* const* rows, const float* value,
                   int m, int64_t at, int64_t row) {
  int64_t j = 0;
  for (; j + 4 * kSparseLanes <= row; j += 4 * kSparseLanes) {
    __m256 a0 = _mm256_loadu_ps(dst + j);
    __m256 a1 = _mm256_loadu_ps(dst + j + kSparseLanes);
    __m256 a2 = _mm256_loadu_ps(dst + j + 2 * kSparseLanes);
    __m256 a3 = _mm256_loadu_ps(dst + j + 3 * kSparseLanes);
    for (int t = 0; t < m; ++t) {
      const __m256 v = _mm256_set1_ps(value[t]);
      const float* r = rows[t] + at + j;
      a0 = _mm256_fmadd_ps(v, _mm256_loadu_ps(r), a0);
      a1 = _mm256_fmadd_ps(v, _mm256_loadu_ps(r + kSparseLanes), a1);
      a2 = _mm256_fmadd_ps(v, _mm256_loadu_ps(r + 2 * kSparseLanes), a2);
      a3 = _mm256_fmadd_ps(v, _mm256_loadu_ps(r + 3 * kSparseLanes), a3);
    }
    _mm256_storeu_ps(dst + j, a0);
    _mm256_storeu_ps(dst + j + kSparseLanes, a1);
    _mm256_storeu_ps(dst + j + 2 * kSparseLanes, a2);
    _mm256_storeu_ps(dst + j + 3 * kSparseLanes, a3);
  }
  for (; j + kSparseLanes <= row; j += kSparseLanes) {
    __m256 a = _mm256_loadu_ps(dst + j);
    for (int t = 0; t < m; ++t) {
      a = _mm256_fmadd_ps(_mm256_set1_ps(value[t]),
                          _mm256_loadu_ps(rows[t] + at + j), a);
    }
    _mm256_storeu_ps(dst + j, a);
  }
  for (; j < row; ++j) {
    float a = dst[j];
    for (int t = 0; t < m; ++t) a = std::fma(value[t], rows[t][at + j], a);
    dst[j] = a;
  }
}

// One image of the input gradient with AVX2, as
// SparseConvBackpropInputImageAvx512 (same contract).
void InputImageAvx2(const SparseConvGradShape& s, const float* dyi,
                    const float* wt, float* dxi, int* channel, float* value,
                    const float** rows) {
  const int64_t line = s.w * s.c;
  // Down the columns: the next pixel's window rows are the same addresses
  // as this one's (shifted by a row), so its loads of dx find the stores
  // just made whole in the store buffer; along a row they would straddle
  // them and stall. (Summing all the window rows that land on an input
  // row in one pass measured 1.4x slower: longer FMA chains per register.)
  for (int64_t ox = 0; ox < s.ow; ++ox) {
    for (int64_t oy = 0; oy < s.oh; ++oy) {
      const int m =
          NonzeroChannels(dyi + (oy * s.ow + ox) * s.oc, s.oc, channel, value);
      if (m == 0) continue;
      for (int i = 0; i < m; ++i) rows[i] = wt + channel[i] * s.size;
      // Each window row of dx += the nonzero channels' filter rows times
      // their gradients, a few packets at a time in registers.
      float* base = dxi + (oy * s.sh * s.w + ox * s.sw) * s.c;
      for (int64_t kh = 0; kh < s.kh; ++kh) {
        AddRow(base + kh * line, rows, value, m, kh * s.row_pad, s.row);
      }
    }
  }
}

// One image of the filter gradient with AVX2, as
// SparseConvBackpropFilterImageAvx512 (the same sums in the same order;
// scratch: src and value oc * oh * ow, the rest oc): per output channel,
// the list of its nonzero pixels (their window in x and the gradient),
// then per window row a sum over that list in registers.
void FilterImageAvx2(const SparseConvGradShape& s, const float* xi,
                     const float* dyi, float* sum, const float** src,
                     float* value, int64_t* count, int* channel,
                     float* nonzero) {
  const int64_t pixels = s.oh * s.ow, line = s.w * s.c;
  std::fill(count, count + s.oc, 0);
  for (int64_t oy = 0; oy < s.oh; ++oy) {
    for (int64_t ox = 0; ox < s.ow; ++ox) {
      const float* at = xi + (oy * s.sh * s.w + ox * s.sw) * s.c;
      const int m = NonzeroChannels(dyi + (oy * s.ow + ox) * s.oc, s.oc,
                                    channel, nonzero);
      for (int i = 0; i < m; ++i) {
        const int64_t o = channel[i], k = o * pixels + count[o]++;
        src[k] = at;
        value[k] = nonzero[i];
      }
    }
  }
  for (int64_t o = 0; o < s.oc; ++o) {
    if (count[o] == 0) continue;
    for (int64_t kh = 0; kh < s.kh; ++kh) {
      AccumulateRow(src + o * pixels, kh * line, value + o * pixels, count[o],
                    s.row, s.row_pad, sum + o * s.size + kh * s.row_pad);
    }
  }
}

double NonzeroFractionAvx2(const float* dy, int64_t n) {
  if (n <= 0) return 0;
  int64_t count = 0, i = 0;
  const __m256 zero = _mm256_setzero_ps();
  for (; i + kSparseLanes <= n; i += kSparseLanes) {
    // NaN != 0 too: a NaN gradient is never skipped.
    const __m256 ne = _mm256_cmp_ps(_mm256_loadu_ps(dy + i), zero, _CMP_NEQ_UQ);
    count += __builtin_popcount(_mm256_movemask_ps(ne));
  }
  for (; i < n; ++i) count += dy[i] != 0.0f;
  return static_cast<double>(count) / n;
}

}  // namespace

double NonzeroFraction(const float* dy, int64_t n) {
  return UsedIsa() == CpuIsa::kAvx512 ? NonzeroFractionAvx512(dy, n)
                                      : NonzeroFractionAvx2(dy, n);
}

bool UseSparseConvGrad(const float* dy, const Window2D& g, int64_t oc) {
  // A nonzero's work is a window row of kw * c floats per kernel row:
  // with rows shorter than two AVX2 packets the bookkeeping per pixel
  // costs more than the multiply-adds saved (conv_benchmark, B1's 5-float
  // rows: 3.4x slower than the dense filter gradient; B2's 50-float rows:
  // 1.6x faster). Windows that reach into padding (SAME) keep the dense
  // kernels.
  if (g.kw * g.c < 2 * kSparseLanes || oc <= 0) return false;
  if (g.pad_top != 0 || g.pad_left != 0 || (g.oh - 1) * g.sh + g.kh > g.h ||
      (g.ow - 1) * g.sw + g.kw > g.w) {
    return false;
  }
  const int64_t n = g.n * g.oh * g.ow * oc;
  return n > 0 && NonzeroFraction(dy, n) <= kSparseConvGradMaxDensity;
}

void SparseConvBackpropInput(const KernelContext& ctx, const float* dy,
                             const float* w, float* dx, const Window2D& g,
                             int64_t oc) {
  SparseConvBackpropInput(ctx.intra_op(), UsedIsa(), dy, w, dx, g, oc);
}

void SparseConvBackpropFilter(const KernelContext& ctx, const float* x,
                              const float* dy, float* dw, const Window2D& g,
                              int64_t oc) {
  SparseConvBackpropFilter(ctx.intra_op(), UsedIsa(), x, dy, dw, g, oc);
}

void SparseConvBackpropInput(const ThreadPool& pool, CpuIsa isa,
                             const float* dy, const float* w, float* dx,
                             const Window2D& g, int64_t oc) {
  // Filter rows on whole cache lines for the AVX-512 loop's loads.
  const SparseConvGradShape s =
      ShapeOf(g, oc, isa == CpuIsa::kAvx512 ? 16 : kSparseLanes);
  // Row o: w[:, o] in the patch layout, zeros in the padding; 64-byte
  // aligned.
  std::vector<float> wt_buffer(oc * s.size + 16, 0.0f);
  float* wt =
      wt_buffer.data() +
      (16 - reinterpret_cast<uintptr_t>(wt_buffer.data()) / 4 % 16) % 16;
  for (int64_t kh = 0; kh < g.kh; ++kh) {
    for (int64_t j = 0; j < s.row; ++j) {
      for (int64_t o = 0; o < oc; ++o) {
        wt[o * s.size + kh * s.row_pad + j] = w[(kh * s.row + j) * oc + o];
      }
    }
  }
  const auto image = isa == CpuIsa::kAvx512
                         ? &SparseConvBackpropInputImageAvx512
                         : &InputImageAvx2;
  const int64_t in_image = g.h * g.w * g.c, out_image = g.oh * g.ow * oc;
  pool.ParallelFor(g.n, CyclesPerImage(g, oc), [&](int64_t b, int64_t e) {
    // 16 entries of slack for the AVX-512 lists' whole-vector stores.
    std::vector<int> channel(oc);
    std::vector<float> value(oc + 16);
    std::vector<const float*> rows(oc + 16);
    for (int64_t n = b; n < e; ++n) {
      float* dxi = dx + n * in_image;
      std::fill(dxi, dxi + in_image, 0.0f);
      image(s, dy + n * out_image, wt, dxi, channel.data(), value.data(),
            rows.data());
    }
  });
}

void SparseConvBackpropFilter(const ThreadPool& pool, CpuIsa isa,
                              const float* x, const float* dy, float* dw,
                              const Window2D& g, int64_t oc) {
  const SparseConvGradShape s = ShapeOf(g, oc, kSparseLanes);
  if (g.n <= 0) {
    std::fill(dw, dw + g.kh * s.row * oc, 0.0f);
    return;
  }
  // Shards of consecutive images, each summing into its own transposed
  // gradient [oc][patch layout]; a fixed split, so the order of the sums
  // below is too.
  const double per_image = CyclesPerImage(g, oc);
  const int64_t shards0 =
      ThreadPool::ShardCount(g.n, per_image, pool.Parallelism());
  const int64_t per = (g.n + shards0 - 1) / shards0;
  const int64_t shards = (g.n + per - 1) / per;
  std::vector<std::vector<float>> partial(shards);
  const int64_t in_image = g.h * g.w * g.c, out_image = g.oh * g.ow * oc;
  const int64_t pixels = g.oh * g.ow;
  pool.ParallelFor(shards, per_image * per, [&](int64_t sb, int64_t se) {
    // 16 entries of slack for the AVX-512 lists' whole-vector stores.
    std::vector<const float*> src(oc * pixels + 16), window(pixels);
    std::vector<float> value(oc * pixels + 16);
    std::vector<int64_t> count(oc);
    std::vector<int> channel(oc);
    std::vector<float> nonzero(oc);
    for (int64_t sh = sb; sh < se; ++sh) {
      std::vector<float>& sum = partial[sh];
      sum.assign(oc * s.size, 0.0f);
      for (int64_t n = sh * per; n < std::min(g.n, (sh + 1) * per); ++n) {
        const float *xi = x + n * in_image, *dyi = dy + n * out_image;
        if (isa == CpuIsa::kAvx512) {
          SparseConvBackpropFilterImageAvx512(s, xi, dyi, sum.data(),
                                              window.data(), src.data(),
                                              value.data(), count.data());
        } else {
          FilterImageAvx2(s, xi, dyi, sum.data(), src.data(), value.data(),
                          count.data(), channel.data(), nonzero.data());
        }
      }
    }
  });
  // dw = the shards' sums, back in HWIO, added in shard order.
  for (int64_t kh = 0; kh < g.kh; ++kh) {
    for (int64_t j = 0; j < s.row; ++j) {
      for (int64_t o = 0; o < oc; ++o) {
        const int64_t at = o * s.size + kh * s.row_pad + j;
        float v = partial[0][at];
        for (int64_t p = 1; p < shards; ++p) v += partial[p][at];
        dw[(kh * s.row + j) * oc + o] = v;
      }
    }
  }
}

}  // namespace ipuflow::ops
