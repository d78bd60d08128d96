#include "ops/math/vector_math.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace ipuflow::ops {
namespace {

using Fn = void (*)(const float*, float*, int64_t);

struct Case {
  const char* name;
  Fn fn;
  double (*ref)(double);
  double max_ulp;  // Against the float64 function.
};

double Sigmoid64(double x) { return 1 / (1 + std::exp(-x)); }
double Rsqrt64(double x) { return 1 / std::sqrt(x); }
double Exp64(double x) { return std::exp(x); }
double Log64(double x) { return std::log(x); }
double Sqrt64(double x) { return std::sqrt(x); }
double Tanh64(double x) { return std::tanh(x); }

const Case kCases[] = {
    {"exp", VecExp, Exp64, 1.5},           {"log", VecLog, Log64, 1},
    {"sqrt", VecSqrt, Sqrt64, 0.5},        {"rsqrt", VecRsqrt, Rsqrt64, 3.5},
    {"sigmoid", VecSigmoid, Sigmoid64, 3}, {"tanh", VecTanh, Tanh64, 1.5},
};

float FromBits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

uint32_t Bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

// |got - ref| in units of the float spacing at ref (the subnormal spacing
// below the normals); 0 when both are the same infinity or both NaN.
double UlpError(float got, double ref) {
  if (std::isnan(ref)) return std::isnan(got) ? 0 : 1e9;
  const float rf = static_cast<float>(ref);
  if (std::isinf(rf) || std::isinf(got)) return rf == got ? 0 : 1e9;
  double spacing =
      std::nextafter(std::fabs(rf), std::numeric_limits<float>::infinity()) -
      std::fabs(rf);
  spacing = std::max(
      spacing, static_cast<double>(std::numeric_limits<float>::denorm_min()));
  return std::fabs(got - ref) / spacing;
}

// Every 4099th bit pattern (~1M floats: both signs, subnormals, infinities,
// NaNs) against the float64 function.
TEST(VectorMathTest, WithinUlpsOfFloat64OverAllBitPatterns) {
  std::vector<float> x;
  for (uint64_t b = 0; b < (uint64_t{1} << 32); b += 4099) {
    x.push_back(FromBits(static_cast<uint32_t>(b)));
  }
  std::vector<float> y(x.size());
  for (const Case& c : kCases) {
    c.fn(x.data(), y.data(), static_cast<int64_t>(x.size()));
    double worst = 0;
    float at = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const double e = UlpError(y[i], c.ref(x[i]));
      if (e > worst) worst = e, at = x[i];
    }
    EXPECT_LE(worst, c.max_ulp) << c.name << " at x = " << at;
  }
}

// The cases: Eigen's packet functions gave exp(-inf) = 2.9e-39,
// sqrt(inf) = NaN, flushed subnormal inputs, and only in full blocks.
TEST(VectorMathTest, SpecialValuesAsTheCLibrary) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float sub = std::numeric_limits<float>::denorm_min() * 1000;
  const std::vector<float> x = {
      -inf,    inf,     nan,    0.0f,   -0.0f, sub,   -sub,   -88.8f, -100.0f,
      -103.9f, -104.5f, 88.72f, 88.73f, 1.0f,  -1.0f, 1e-30f, -50.0f};
  for (const Case& c : kCases) {
    // At every position of a 19-element tensor: body and tail alike.
    for (int shift = 0; shift < 19; ++shift) {
      std::vector<float> in(19 + x.size(), 0.5f), out(in.size());
      for (size_t i = 0; i < x.size(); ++i) in[shift + i] = x[i];
      c.fn(in.data(), out.data(), static_cast<int64_t>(in.size()));
      for (size_t i = 0; i < x.size(); ++i) {
        const float got = out[shift + i];
        const double ref = c.ref(x[i]);
        if (std::isnan(ref)) {
          EXPECT_TRUE(std::isnan(got)) << c.name << "(" << x[i] << ")";
          continue;
        }
        EXPECT_LE(UlpError(got, ref), c.max_ulp)
            << c.name << "(" << x[i] << ") = " << got << ", want " << ref
            << " (position " << shift + i << ")";
      }
    }
  }
  float y;
  VecExp(&x[0], &y, 1);
  EXPECT_EQ(Bits(y), Bits(0.0f));  // exp(-inf) = +0 exactly.
  VecSqrt(&x[1], &y, 1);
  EXPECT_EQ(y, inf);
  VecSqrt(&x[4], &y, 1);
  EXPECT_EQ(Bits(y), Bits(-0.0f));
  VecRsqrt(&x[3], &y, 1);
  EXPECT_EQ(y, inf);
  VecLog(&x[3], &y, 1);
  EXPECT_EQ(y, -inf);
  VecLog(&sub, &y, 1);  // Not flushed: log(1000 * 2^-149).
  EXPECT_NEAR(y, std::log(static_cast<double>(sub)), 1e-5);
  VecExp(&x[8], &y, 1);  // exp(-100) = 3.78e-44, a subnormal.
  EXPECT_GT(y, 0.0f);
  EXPECT_LT(y, std::numeric_limits<float>::min());
  const float s = -20.0f;  // sigmoid(-20) = 2.06e-9, relative 1e-7.
  VecSigmoid(&s, &y, 1);
  EXPECT_NEAR(y / Sigmoid64(-20), 1.0, 5e-7);
  VecTanh(&x[4], &y, 1);
  EXPECT_EQ(Bits(y), Bits(-0.0f));
  VecTanh(&x[0], &y, 1);
  EXPECT_EQ(y, -1.0f);
  VecTanh(&x[1], &y, 1);
  EXPECT_EQ(y, 1.0f);
  EXPECT_EQ(TanhExact(1e-30f), 1e-30f);
}

// A value gives the same bits at every position, in a body block or the
// tail, for every length.
TEST(VectorMathTest, ResultDoesNotDependOnPosition) {
  std::vector<float> values;
  for (int i = 0; i < 64; ++i) values.push_back(-90.0f + 2.93f * i);
  for (const Case& c : kCases) {
    for (float v : values) {
      float want;
      c.fn(&v, &want, 1);
      for (int64_t n : {1, 7, 8, 9, 15, 16, 17, 19, 33}) {
        std::vector<float> in(n, v), out(n);
        c.fn(in.data(), out.data(), n);
        for (int64_t i = 0; i < n; ++i) {
          ASSERT_EQ(Bits(out[i]), Bits(want))
              << c.name << "(" << v << ") at " << i << " of " << n;
        }
      }
    }
  }
}

TEST(VectorMathTest, InPlace) {
  std::vector<float> x = {0.0f, 1.0f, 2.0f, -1.0f, 3.0f,
                          0.5f, 4.0f, 5.0f, 6.0f,  7.0f};
  std::vector<float> y(x.size());
  VecExp(x.data(), y.data(), 10);
  VecExp(x.data(), x.data(), 10);
  EXPECT_EQ(x, y);
  EXPECT_EQ(ExpExact(1.0f), y[1]);
  EXPECT_NEAR(LogExact(std::exp(1.0f)), 1.0f, 1e-7);
}

}  // namespace
}  // namespace ipuflow::ops
