#include "ops/math/vector_math.h"

#include <immintrin.h>

#include <algorithm>

namespace ipuflow::ops {
namespace {

inline __m256 Set(float v) { return _mm256_set1_ps(v); }

// 2^n for integer n in [-126, 127], as a float.
inline __m256 Pow2(__m256i n) {
  return _mm256_castsi256_ps(
      _mm256_slli_epi32(_mm256_add_epi32(n, _mm256_set1_epi32(127)), 23));
}

// Cephes expf: x = n ln2 + r, |r| <= ln2 / 2 (ln2 in two parts, so n ln2
// is exact), e^r by a degree-7 polynomial, then the scaling by 2^n in two
// halves so that results below 2^-126 round once, into the subnormals.
inline __m256 Exp8(__m256 x) {
  // Outside [-104, 89] the result is 0 or inf already; clamping keeps n in
  // range for the two-part scaling. max/min return their second operand
  // for NaN: restored below.
  const __m256 xc = _mm256_min_ps(_mm256_max_ps(x, Set(-104.0f)), Set(89.0f));
  const __m256 n =
      _mm256_round_ps(_mm256_mul_ps(xc, Set(1.44269504088896341f)),
                      _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, Set(0.693359375f), xc);
  r = _mm256_fnmadd_ps(n, Set(-2.12194440e-4f), r);
  __m256 p = Set(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, Set(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, Set(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, Set(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, Set(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, Set(5.0000001201e-1f));
  const __m256 r2 = _mm256_mul_ps(r, r);
  p = _mm256_fmadd_ps(p, r2, _mm256_add_ps(r, Set(1.0f)));
  // n in [-150, 128]: n = n1 + n2, both in [-75, 64].
  const __m256i ni = _mm256_cvtps_epi32(n);
  const __m256i n1 = _mm256_srai_epi32(ni, 1);
  const __m256i n2 = _mm256_sub_epi32(ni, n1);
  const __m256 y = _mm256_mul_ps(_mm256_mul_ps(p, Pow2(n1)), Pow2(n2));
  const __m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
  return _mm256_blendv_ps(y, _mm256_add_ps(x, x), nan);
}

// Cephes logf: x = 2^e m, m in [sqrt(1/2), sqrt(2)), log(m) = f - f^2/2 +
// f^3 P(f) with f = m - 1; subnormal x scaled by 2^23 first (exact).
inline __m256 Log8(__m256 x) {
  const __m256 tiny = _mm256_cmp_ps(x, Set(1.17549435e-38f), _CMP_LT_OQ);
  const __m256 xs =
      _mm256_blendv_ps(x, _mm256_mul_ps(x, Set(8388608.0f)), tiny);
  const __m256 e_adj = _mm256_and_ps(tiny, Set(23.0f));
  const __m256i bits = _mm256_castps_si256(xs);
  __m256 e = _mm256_cvtepi32_ps(
      _mm256_sub_epi32(_mm256_srli_epi32(bits, 23), _mm256_set1_epi32(126)));
  e = _mm256_sub_ps(e, e_adj);
  // m in [0.5, 1).
  __m256 m = _mm256_castsi256_ps(
      _mm256_or_si256(_mm256_and_si256(bits, _mm256_set1_epi32(0x007fffff)),
                      _mm256_set1_epi32(0x3f000000)));
  const __m256 small = _mm256_cmp_ps(m, Set(0.707106781186547524f), _CMP_LT_OQ);
  // m < sqrt(1/2): f = 2m - 1, e - 1; else f = m - 1.
  e = _mm256_sub_ps(e, _mm256_and_ps(small, Set(1.0f)));
  const __m256 f =
      _mm256_sub_ps(_mm256_add_ps(m, _mm256_and_ps(small, m)), Set(1.0f));
  const __m256 z = _mm256_mul_ps(f, f);
  __m256 p = Set(7.0376836292e-2f);
  p = _mm256_fmadd_ps(p, f, Set(-1.1514610310e-1f));
  p = _mm256_fmadd_ps(p, f, Set(1.1676998740e-1f));
  p = _mm256_fmadd_ps(p, f, Set(-1.2420140846e-1f));
  p = _mm256_fmadd_ps(p, f, Set(1.4249322787e-1f));
  p = _mm256_fmadd_ps(p, f, Set(-1.6668057665e-1f));
  p = _mm256_fmadd_ps(p, f, Set(2.0000714765e-1f));
  p = _mm256_fmadd_ps(p, f, Set(-2.4999993993e-1f));
  p = _mm256_fmadd_ps(p, f, Set(3.3333331174e-1f));
  __m256 y = _mm256_mul_ps(_mm256_mul_ps(p, f), z);
  y = _mm256_fmadd_ps(e, Set(-2.12194440e-4f), y);
  y = _mm256_fnmadd_ps(Set(0.5f), z, y);
  __m256 res = _mm256_add_ps(f, y);
  res = _mm256_fmadd_ps(e, Set(0.693359375f), res);
  // Special values: log(+-0) = -inf, log(x < 0) = NaN, log(inf) = inf,
  // NaN stays NaN.
  const float kInf = __builtin_inff();
  res =
      _mm256_blendv_ps(res, Set(kInf), _mm256_cmp_ps(x, Set(kInf), _CMP_EQ_OQ));
  res = _mm256_blendv_ps(res, Set(-kInf),
                         _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_EQ_OQ));
  res = _mm256_blendv_ps(res, Set(__builtin_nanf("")),
                         _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ));
  return _mm256_blendv_ps(res, _mm256_add_ps(x, x),
                          _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

// sqrt: the instruction, correctly rounded as std::sqrt. Eigen's Newton
// estimate was 1.3-1.4x faster (vector_math_benchmark) but 3.7 ulp off, NaN
// at inf and 0 for subnormals.
inline __m256 Sqrt8(__m256 x) { return _mm256_sqrt_ps(x); }

// Lanes outside the positive normal floats (0, subnormals, inf, negative,
// NaN): they take the exact 1 / sqrt(x); the others the estimate below.
// Chosen per lane, so a value's result does not depend on its neighbours.
inline __m256 NotPositiveNormal(__m256 x) {
  return _mm256_or_ps(_mm256_cmp_ps(x, Set(1.17549435e-38f), _CMP_NGE_UQ),
                      _mm256_cmp_ps(x, Set(3.40282347e+38f), _CMP_NLE_UQ));
}

// 1/sqrt(x): for positive normal x the hardware estimate (12 bits) and one
// Newton step, r (1.5 - x/2 r^2), within 3 ulp, as fast as Eigen's (a
// second, FMA-residual step makes it 1.5 ulp but costs 1.4x); for the other
// lanes 1 / sqrt(x) (rsqrt(+-0) = +-inf, rsqrt(inf) = 0, subnormals
// exact, negative and NaN give NaN).
inline __m256 Rsqrt8(__m256 x) {
  __m256 r = _mm256_rsqrt_ps(x);
  const __m256 hx = _mm256_mul_ps(x, Set(0.5f));
  r = _mm256_mul_ps(r, _mm256_fnmadd_ps(_mm256_mul_ps(hx, r), r, Set(1.5f)));
  const __m256 other = NotPositiveNormal(x);
  if (_mm256_testz_ps(other, other)) return r;
  return _mm256_blendv_ps(r, _mm256_div_ps(Set(1.0f), _mm256_sqrt_ps(x)),
                          other);
}

// e = e^-|x|; 1 / (1 + e) for x >= 0, e / (1 + e) for x < 0: no
// cancellation on either side.
inline __m256 Sigmoid8(__m256 x) {
  const __m256 sign = Set(-0.0f);
  const __m256 e = Exp8(_mm256_or_ps(x, sign));  // -|x|
  const __m256 neg = _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ);
  return _mm256_div_ps(_mm256_blendv_ps(Set(1.0f), e, neg),
                       _mm256_add_ps(Set(1.0f), e));
}

// tanh as Cephes' tanhf (S. L. Moshier, Cephes Math Library, tanhf.c):
// an odd polynomial below |x| = 0.625, else 1 - 2 / (e^2|x| + 1) with x's
// sign (e^2|x| overflows to inf above 44.4, giving exactly 1); -0, NaN,
// subnormals and the infinities as the C library's tanhf.
inline __m256 Tanh8(__m256 x) {
  const __m256 sign = Set(-0.0f);
  const __m256 ax = _mm256_andnot_ps(sign, x);
  const __m256 z = _mm256_mul_ps(x, x);
  __m256 p = Set(-5.70498872745e-3f);
  p = _mm256_fmadd_ps(p, z, Set(2.06390887954e-2f));
  p = _mm256_fmadd_ps(p, z, Set(-5.37397155531e-2f));
  p = _mm256_fmadd_ps(p, z, Set(1.33314422036e-1f));
  p = _mm256_fmadd_ps(p, z, Set(-3.33332819422e-1f));
  // Both on |x|, then x's sign (so tanh(-0) = -0).
  const __m256 small = _mm256_fmadd_ps(_mm256_mul_ps(p, z), ax, ax);
  const __m256 e = Exp8(_mm256_add_ps(ax, ax));
  const __m256 large = _mm256_sub_ps(
      Set(1.0f), _mm256_div_ps(Set(2.0f), _mm256_add_ps(e, Set(1.0f))));
  return _mm256_or_ps(
      _mm256_and_ps(sign, x),
      _mm256_blendv_ps(large, small,
                       _mm256_cmp_ps(ax, Set(0.625f), _CMP_LT_OQ)));
}

// Full blocks of 8 in place, then the rest in a padded block through the
// same function, so every value takes the same instructions.
template <__m256 (*F)(__m256)>
void Apply(const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + i + 8);
    _mm256_storeu_ps(y + i, F(a));
    _mm256_storeu_ps(y + i + 8, F(b));
  }
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, F(_mm256_loadu_ps(x + i)));
  if (i < n) {
    float buf[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    std::copy(x + i, x + n, buf);
    _mm256_storeu_ps(buf, F(_mm256_loadu_ps(buf)));
    std::copy(buf, buf + (n - i), y + i);
  }
}

float One(__m256 (*f)(__m256), float x) {
  float buf[8];
  _mm256_storeu_ps(buf, f(_mm256_set1_ps(x)));
  return buf[0];
}

}  // namespace

void VecExp(const float* x, float* y, int64_t n) { Apply<Exp8>(x, y, n); }
void VecLog(const float* x, float* y, int64_t n) { Apply<Log8>(x, y, n); }
void VecSqrt(const float* x, float* y, int64_t n) { Apply<Sqrt8>(x, y, n); }
void VecRsqrt(const float* x, float* y, int64_t n) { Apply<Rsqrt8>(x, y, n); }
void VecSigmoid(const float* x, float* y, int64_t n) {
  Apply<Sigmoid8>(x, y, n);
}

void VecTanh(const float* x, float* y, int64_t n) { Apply<Tanh8>(x, y, n); }

float ExpExact(float x) { return One(Exp8, x); }
float LogExact(float x) { return One(Log8, x); }
float TanhExact(float x) { return One(Tanh8, x); }

}  // namespace ipuflow::ops
