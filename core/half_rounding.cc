#include "core/half_rounding.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "Eigen/Core"
#if defined(__F16C__) && defined(__AVX__)
#include <immintrin.h>
#endif
#include "core/floating_point.h"
#include "core/hash_mix.h"

namespace ipuflow {
namespace {

using FloatArray = Eigen::Map<const Eigen::Array<float, Eigen::Dynamic, 1>>;
using HalfArray = Eigen::Map<Eigen::Array<half, Eigen::Dynamic, 1>>;

constexpr float kHalfMax = 65504.0f;
// The smallest magnitude that rounds to infinity to nearest (halfway
// between 65504 and 2^16; the tie goes to the even 2^16).
constexpr float kHalfOverflow = 65520.0f;
// Elements per block: the stack buffer between rounding and the cast.
constexpr int64_t kBlock = 512;

// Builds are -O2, whose "very cheap" vectoriser cost model (GCC 12) leaves
// these loops scalar; the dynamic model vectorises them (AVX2: 8 lanes).
#if defined(__GNUC__) && !defined(__clang__)
#define IPUFLOW_VECTORISE __attribute__((optimize("vect-cost-model=dynamic")))
#else
#define IPUFLOW_VECTORISE
#endif

inline uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
inline float Float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// The 32 random bits of element i for the key (k0, k1): two rounds of a
// 32-bit mixer, a pure function of (key, i).
inline uint32_t ElementBits(uint32_t k0, uint32_t k1, int64_t i) {
  const uint64_t u = static_cast<uint64_t>(i);
  return Mix32(Mix32(static_cast<uint32_t>(u) ^ k0) ^
               (k1 + static_cast<uint32_t>(u >> 32) * 0x9e3779b9U));
}

// Rounds src[j] to a float holding a float16 value (or beyond the float16
// range: overflow is handled after), up or down with probability
// proportional to the distance. Works on the magnitude, so rounding away
// from zero with probability frac is unbiased for negative values too:
//  - |x| >= 2^-24 (float exponent field e >= 103): float16 keeps
//    d = 13 + max(0, 113 - e) fewer significand bits than float32 (13 for
//    float16 normals, up to 23 for its subnormals). Adding d random bits
//    to the bit pattern and clearing them carries into the kept bits with
//    probability exactly (dropped bits) / 2^d = (x - lo) / (hi - lo); a
//    carry out of the significand moves to the next binade, which is hi.
//  - |x| < 2^-24: 2^-24 with probability |x| / 2^-24, else 0.
//  - inf and NaN pass through.
// Branch-free, so the loop vectorises (32-bit multiplies and shifts).
IPUFLOW_VECTORISE void StochasticBlock(const float* __restrict src,
                                       float* __restrict dst, int64_t n,
                                       uint32_t k0, uint32_t k1,
                                       int64_t first) {
  for (int64_t j = 0; j < n; ++j) {
    const uint32_t r = ElementBits(k0, k1, first + j);
    const uint32_t b = Bits(src[j]);
    const uint32_t sign = b & 0x80000000U;
    const uint32_t a = b ^ sign;
    const int32_t e = static_cast<int32_t>(a >> 23);
    const int32_t d = 13 + std::min(std::max(113 - e, 0), 10);
    const uint32_t mask = (1U << d) - 1;
    const uint32_t rounded = (a + (r & mask)) & ~mask;
    const float tiny_up = Float(a) * 0x1p24f;  // In [0, 1) when tiny.
    const uint32_t tiny =
        static_cast<float>(r >> 8) * 0x1p-24f < tiny_up ? 0x33800000U : 0;
    const uint32_t out = e >= 0xff ? a : (e < 103 ? tiny : rounded);
    dst[j] = Float(out | sign);
  }
}

// dst[j] = src[j], or +-overflow_value where it would overflow float16
// (src may be dst).
IPUFLOW_VECTORISE void HandleOverflow(const float* src, float* dst, int64_t n,
                                      float overflow_value) {
  for (int64_t j = 0; j < n; ++j) {
    const float v = src[j];
    const float mag = std::fabs(v);
    const bool over = mag >= kHalfOverflow && mag != INFINITY;
    dst[j] = over ? std::copysign(overflow_value, v) : v;
  }
}

// float32 -> float16, round to nearest even (exact for the values the
// stochastic and overflow passes leave). F16C converts 8 at a time; Eigen's
// array cast stays scalar here (about 3 cycles an element).
void NarrowToHalf(const float* src, half* dst, int64_t n) {
  int64_t j = 0;
#if defined(__F16C__) && defined(__AVX__)
  for (; j + 8 <= n; j += 8) {
    const __m128i h =
        _mm256_cvtps_ph(_mm256_loadu_ps(src + j), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + j), h);
  }
#endif
  if (j < n)
    HalfArray(dst + j, n - j) = FloatArray(src + j, n - j).cast<half>();
}

// The key of one kernel run's output: seed, run, node, output and (unless
// the value is replica-identical and rounds without it) the global replica.
uint64_t RoundingKey(const KernelContext& ctx, const FloatingPointBehaviour& fp,
                     int output, bool keyed_by_replica) {
  uint64_t k = Mix64(fp.seed + kGoldenGamma);
  k = Mix64(k ^ ctx.run_stream());
  k = Mix64(k + (static_cast<uint64_t>(ctx.node().id()) << 16 |
                 static_cast<uint64_t>(output)));
  if (keyed_by_replica) {
    k = Mix64(k +
              (static_cast<uint64_t>(ctx.global_replica()) + 1) * kGoldenGamma);
  }
  return k;
}

}  // namespace

void RoundToHalf(const KernelContext& ctx, int output, const float* src,
                 half* dst, int64_t n, int64_t first) {
  const FloatingPointBehaviour* fp = ctx.env().floating_point;
  if (fp == nullptr) {  // The host: IEEE round to nearest even.
    NarrowToHalf(src, dst, n);
    return;
  }
  const bool stochastic =
      fp->esr == StochasticRounding::kOn ||
      (fp->esr == StochasticRounding::kReplicaIdenticalOnly &&
       ctx.replica_identical());
  uint32_t k0 = 0, k1 = 0;
  if (stochastic) {
    const uint64_t key =
        RoundingKey(ctx, *fp, output, fp->esr == StochasticRounding::kOn);
    k0 = static_cast<uint32_t>(key);
    k1 = static_cast<uint32_t>(key >> 32);
  }
  // Overflow: NaN with nanoo, else saturation to +-65504. Infinities (not
  // overflows) stay infinite; NaN stays NaN.
  const float overflow_value =
      fp->nanoo ? std::numeric_limits<float>::quiet_NaN() : kHalfMax;
  const bool note_overflow = fp->nanoo && fp->any_trap();
  bool note_overflow_done = false;
  float buf[kBlock];
  for (int64_t off = 0; off < n; off += kBlock) {
    const int64_t m = std::min(kBlock, n - off);
    const float* s = src + off;
    if (stochastic) {
      StochasticBlock(s, buf, m, k0, k1, first + off);
      s = buf;
    }
    if (note_overflow && !note_overflow_done) {  // Only with traps on.
      for (int64_t j = 0; j < m; ++j) {
        const float mag = std::fabs(s[j]);
        if (mag >= kHalfOverflow && mag != INFINITY) {
          ctx.NoteHalfOverflow(output);
          note_overflow_done = true;
          break;
        }
      }
    }
    HandleOverflow(s, buf, m, overflow_value);
    NarrowToHalf(buf, dst + off, m);
  }
}

void WidenHalf(const half* src, float* dst, int64_t n) {
  int64_t j = 0;
#if defined(__F16C__) && defined(__AVX__)
  for (; j + 8 <= n; j += 8) {
    _mm256_storeu_ps(dst + j, _mm256_cvtph_ps(_mm_loadu_si128(
                                  reinterpret_cast<const __m128i*>(src + j))));
  }
#endif
  if (j == n) return;
  Eigen::Map<Eigen::Array<float, Eigen::Dynamic, 1>>(dst + j, n - j) =
      Eigen::Map<const Eigen::Array<half, Eigen::Dynamic, 1>>(src + j, n - j)
          .cast<float>();
}

}  // namespace ipuflow
