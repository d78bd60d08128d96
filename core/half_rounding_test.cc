// RoundToHalf: stochastic rounding's statistics (unbiased, P(hi) =
// (x - lo) / (hi - lo)) in every range of float16, its reproducibility
// (seed, runs, chunking), REPLICA_IDENTICAL_ONLY on one replica, and
// overflow with and without nanoo. Deterministic: fixed seeds.
#include "core/half_rounding.h"

#include <cmath>
#include <cstring>

#include "core/half.h"
#include "core/op_registry.h"
#include "core/session.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/math/cast.h"

namespace ipuflow {
namespace {

// _RoundInChunks(x: float32) -> float16: RoundToHalf over chunks of
// `chunk` elements, to show the result does not depend on the chunking.
REGISTER_OP("_RoundInChunks")
    .Input("x")
    .Attr("chunk", int64_t{1})
    .SetShapeFn([](ShapeContext& c) {
      c.set_output(0, DType::kFloat16, c.input_shape(0));
      return absl::OkStatus();
    })
    .SetKernel([](KernelContext& ctx) -> absl::Status {
      const Tensor& x = ctx.input(0);
      ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.shape()));
      const int64_t n = x.NumElements();
      const int64_t chunk = ctx.attr<int64_t>("chunk");
      for (int64_t b = 0; b < n; b += chunk) {
        RoundToHalf(ctx, 0, x.data<float>() + b, y->data<half>() + b,
                    std::min(chunk, n - b), b);
      }
      return absl::OkStatus();
    })
    .NotDifferentiable("a test op");

FloatingPointBehaviour Stochastic(uint64_t seed) {
  FloatingPointBehaviour fp;
  fp.esr = StochasticRounding::kOn;
  fp.seed = seed;
  return fp;
}

// Rounds `n` copies of x (through Cast) with `fp`; `runs` runs of the same
// program, the last returned.
std::vector<float> Round(const FloatingPointBehaviour* fp, float x, int64_t n,
                         int runs = 1) {
  Scope s = Scope::NewRootScope();
  Output c = ops::Const(s, std::vector<float>(n, x), TensorShape({n}));
  Output h = ops::Cast(s, c, DType::kFloat16);
  IPU_CHECK_OK(s.status());
  Session session(s.graph(), SessionOptions{.intra_op_threads = 2});
  session.env()->floating_point = fp;
  std::vector<Tensor> out;
  for (int r = 0; r < runs; ++r) IPU_CHECK_OK(session.Run({}, {h}, &out));
  std::vector<float> v(n);
  WidenHalf(out[0].data<half>(), v.data(), n);
  return v;
}

float NextHalfUp(float lo) {
  half h(lo);
  uint16_t bits = Eigen::numext::bit_cast<uint16_t>(h);
  return static_cast<float>(Eigen::numext::bit_cast<half>(
      static_cast<uint16_t>(bits + 1)));  // Away from zero.
}

struct Case {
  float x;
  float lo;  // The float16 neighbour towards zero.
};

TEST(HalfRoundingTest, StochasticRoundingIsUnbiasedWithProbabilityByDistance) {
  const Case cases[] = {
      {1.0f + 0x1p-10f / 3, 1.0f},    // Normal, P(hi) = 1/3.
      {-(1000.0f + 0.2f), -1000.0f},  // Negative, spacing 0.5.
      {3.3e-7f, 5 * 0x1p-24f},        // float16 subnormal.
      {1e-8f, 0.0f},                  // Below the smallest subnormal.
      {60000.7f, 60000.0f},           // Near the top, spacing 32.
  };
  const FloatingPointBehaviour fp = Stochastic(7);
  constexpr int64_t kN = 200000;
  for (const Case& c : cases) {
    const float hi = c.lo == 0 ? 0x1p-24f : NextHalfUp(c.lo);
    const double p =
        (std::fabs(c.x) - std::fabs(c.lo)) / (std::fabs(hi) - std::fabs(c.lo));
    ASSERT_GT(p, 0.0);
    ASSERT_LT(p, 1.0);
    const std::vector<float> v = Round(&fp, c.x, kN);
    int64_t up = 0;
    double sum = 0;
    for (float r : v) {
      ASSERT_TRUE(r == c.lo || r == hi) << c.x << " rounded to " << r;
      up += r == hi;
      sum += r;
    }
    const double se_p = std::sqrt(p * (1 - p) / kN);
    EXPECT_NEAR(static_cast<double>(up) / kN, p, 4 * se_p) << c.x;
    const double se_mean = std::fabs(hi - c.lo) * se_p;
    EXPECT_NEAR(sum / kN, c.x, 4 * se_mean) << c.x;
  }
}

TEST(HalfRoundingTest, RepresentableValuesAndSpecialsAreUnchanged) {
  const FloatingPointBehaviour fp = Stochastic(1);
  for (float x : {0.0f, -0.0f, 1.0f, -2.5f, 65504.0f, 0x1p-24f, 0x1p-14f}) {
    for (float r : Round(&fp, x, 64)) {
      EXPECT_EQ(r, x);
      EXPECT_EQ(std::signbit(r), std::signbit(x));
    }
  }
  for (float r : Round(&fp, INFINITY, 8)) EXPECT_EQ(r, INFINITY);
  for (float r : Round(&fp, NAN, 8)) EXPECT_TRUE(std::isnan(r));
}

std::vector<uint16_t> Bits(const Tensor& t) {
  std::vector<uint16_t> b(t.NumElements());
  std::memcpy(b.data(), t.raw_data(), b.size() * 2);
  return b;
}

TEST(HalfRoundingTest, ReproducibleBySeedRunAndWhateverTheChunking) {
  constexpr int64_t kN = 3000;
  std::vector<float> x(kN);
  for (int64_t i = 0; i < kN; ++i) x[i] = 1.0f + 0.37f * std::sin(i * 0.1f);
  auto run = [&](uint64_t seed, int64_t chunk, int runs) {
    Scope s = Scope::NewRootScope();
    Output c = ops::Const(s, x, TensorShape({kN}));
    Output h = s.AddNode("_RoundInChunks", {c}, {{"chunk", chunk}});
    IPU_CHECK_OK(s.status());
    Session session(s.graph());
    const FloatingPointBehaviour fp = Stochastic(seed);
    session.env()->floating_point = &fp;
    std::vector<Tensor> out;
    for (int r = 0; r < runs; ++r) IPU_CHECK_OK(session.Run({}, {h}, &out));
    return Bits(out[0]);
  };
  const std::vector<uint16_t> base = run(5, kN, 1);
  EXPECT_EQ(run(5, kN, 1), base);  // Same seed: bitwise the same.
  for (int64_t chunk : {1, 7, 512, 1000}) {
    EXPECT_EQ(run(5, chunk, 1), base) << "chunk " << chunk;
  }
  EXPECT_NE(run(6, kN, 1), base);  // Another seed.
  EXPECT_NE(run(5, kN, 2), base);  // The program's second run.
  EXPECT_EQ(run(5, 7, 2), run(5, kN, 2));
}

TEST(HalfRoundingTest, OffRoundsToNearestEven) {
  FloatingPointBehaviour fp;  // esr OFF, on a device.
  const float x = 1.0f + 0x1p-10f / 3;
  for (float r : Round(&fp, x, 16)) EXPECT_EQ(r, 1.0f);
  for (float r : Round(nullptr, x, 16)) EXPECT_EQ(r, 1.0f);
}

TEST(HalfRoundingTest,
     ReplicaIdenticalOnlyRoundsIdenticalValuesStochastically) {
  // A constant is replica-identical; a fed value is not.
  FloatingPointBehaviour fp = Stochastic(3);
  fp.esr = StochasticRounding::kReplicaIdenticalOnly;
  constexpr int64_t kN = 4096;
  const float x = 1.0f + 0x1p-10f / 2;
  const std::vector<float> v = Round(&fp, x, kN);
  const int64_t up = std::count(v.begin(), v.end(), NextHalfUp(1.0f));
  EXPECT_GT(up, kN / 4);
  EXPECT_LT(up, 3 * kN / 4);

  Scope s = Scope::NewRootScope();
  Output p = ops::Placeholder(s, DType::kFloat32, {kN});
  Output h = ops::Cast(s, p, DType::kFloat16);
  Session session(s.graph());
  session.env()->floating_point = &fp;
  std::vector<Tensor> out;
  ASSERT_TRUE(session
                  .Run({{p, Tensor::FromVector<float>(std::vector<float>(kN, x),
                                                      TensorShape({kN}))}},
                       {h}, &out)
                  .ok());
  std::vector<float> w(kN);
  WidenHalf(out[0].data<half>(), w.data(), kN);
  for (float r : w) ASSERT_EQ(r, 1.0f);  // Nearest (even).
}

TEST(HalfRoundingTest, OverflowSaturatesOrGivesNaNWithNanoo) {
  FloatingPointBehaviour fp;
  for (float x : {70000.0f, 65520.0f, 1e30f}) {
    for (float r : Round(&fp, x, 4)) EXPECT_EQ(r, 65504.0f) << x;
    for (float r : Round(&fp, -x, 4)) EXPECT_EQ(r, -65504.0f) << x;
    for (float r : Round(nullptr, x, 4)) EXPECT_EQ(r, INFINITY) << x;
  }
  for (float r : Round(&fp, 65519.0f, 4)) EXPECT_EQ(r, 65504.0f);
  for (float r : Round(&fp, INFINITY, 4)) EXPECT_EQ(r, INFINITY);
  fp.nanoo = true;
  for (float r : Round(&fp, 70000.0f, 4)) EXPECT_TRUE(std::isnan(r));
  for (float r : Round(&fp, -70000.0f, 4)) EXPECT_TRUE(std::isnan(r));
  for (float r : Round(&fp, 65519.0f, 4)) EXPECT_EQ(r, 65504.0f);
  for (float r : Round(&fp, -INFINITY, 4)) EXPECT_EQ(r, -INFINITY);
  // Stochastic rounding up from just below 65520 may overflow: NaN, never
  // inf, and the rest 65504.
  fp.esr = StochasticRounding::kOn;
  int nans = 0;
  for (float r : Round(&fp, 65519.0f, 256)) {
    if (std::isnan(r)) {
      ++nans;
    } else {
      EXPECT_EQ(r, 65504.0f);
    }
  }
  EXPECT_GT(nans, 64);  // P = 15/32.
}

TEST(HalfRoundingTest, NearestMatchesIeeeCastBitForBit) {
  // Every float16 value, the midpoints between neighbours (ties to even)
  // and points just off them, through the host (IEEE) and device (no
  // overflow in range) paths.
  std::vector<float> x;
  for (uint32_t b = 0; b < 0x7c00; ++b) {
    const float lo = static_cast<float>(
        Eigen::numext::bit_cast<half>(static_cast<uint16_t>(b)));
    const float hi = static_cast<float>(
        Eigen::numext::bit_cast<half>(static_cast<uint16_t>(b + 1)));
    const float mid = lo + (hi - lo) / 2;
    for (float v :
         {lo, mid, std::nextafter(mid, 0.f), std::nextafter(mid, 1e9f)}) {
      if (v < 65504.0f) {
        x.push_back(v);
        x.push_back(-v);
      }
    }
  }
  const int64_t n = static_cast<int64_t>(x.size());
  Scope s = Scope::NewRootScope();
  Output h = ops::Cast(s, ops::Const(s, x, TensorShape({n})), DType::kFloat16);
  const FloatingPointBehaviour device;
  const std::vector<const FloatingPointBehaviour*> envs = {nullptr, &device};
  for (const FloatingPointBehaviour* fp : envs) {
    Session session(s.graph());
    session.env()->floating_point = fp;
    std::vector<Tensor> out;
    ASSERT_TRUE(session.Run({}, {h}, &out).ok());
    const half* got = out[0].data<half>();
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(Eigen::numext::bit_cast<uint16_t>(got[i]),
                Eigen::numext::bit_cast<uint16_t>(static_cast<half>(x[i])))
          << x[i];
    }
  }
}

TEST(HalfRoundingTest, WidenHalfIsExactForEveryValue) {
  std::vector<half> h(65536 + 5);  // A tail after the 8-wide blocks.
  for (size_t i = 0; i < h.size(); ++i) {
    h[i] = Eigen::numext::bit_cast<half>(static_cast<uint16_t>(i));
  }
  std::vector<float> f(h.size());
  WidenHalf(h.data(), f.data(), static_cast<int64_t>(h.size()));
  for (size_t i = 0; i < h.size(); ++i) {
    const float want = static_cast<float>(h[i]);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(f[i])) << i;
    } else {
      ASSERT_EQ(Eigen::numext::bit_cast<uint32_t>(f[i]),
                Eigen::numext::bit_cast<uint32_t>(want))
          << i;
    }
  }
}

}  // namespace
}  // namespace ipuflow
