#include "ops/math/vector_kernels.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace ipuflow::ops {
namespace {

// Sizes around the vector widths (8, 16, two vectors per iteration), so
// every tail length is met.
const int64_t kSizes[] = {0,  1,  3,  7,  8,  9,  15, 16, 17,  23,
                          31, 32, 33, 47, 48, 63, 64, 65, 250, 1021};

// Random values with NaN, +-inf, +-0 and a denormal sprinkled in.
std::vector<float> Values(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(),
                            -std::numeric_limits<float>::quiet_NaN(),
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            0.0f,
                            -0.0f,
                            1e-40f,
                            -1e-40f};
  std::vector<float> v(n);
  for (float& x : v) x = gen() % 5 == 0 ? specials[gen() % 8] : dist(gen);
  return v;
}

// Bit equality, so NaN == NaN and -0 != +0.
void ExpectSameBits(const std::vector<float>& got,
                    const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(std::memcmp(&got[i], &want[i], 4), 0)
        << what << " at " << i << " of " << got.size() << ": got " << got[i]
        << ", want " << want[i];
  }
}

class VectorKernelsTest : public ::testing::TestWithParam<CpuIsa> {
 protected:
  void SetUp() override {
    if (DetectedIsa() < GetParam()) {
      GTEST_SKIP() << "this CPU has no " << IsaName(GetParam()) << " ("
                   << IsaDescription() << ")";
    }
  }
  const VectorKernels& k() const { return VectorKernelsFor(GetParam()); }
};

TEST_P(VectorKernelsTest, ReluMatchesStdMax) {
  for (int64_t n : kSizes) {
    const std::vector<float> x = Values(n, 1);
    std::vector<float> want(n), got(n, 7.0f);
    for (int64_t i = 0; i < n; ++i) want[i] = std::max(x[i], 0.0f);
    k().relu(x.data(), got.data(), n);
    ExpectSameBits(got, want, "relu n=" + std::to_string(n));
    std::vector<float> in_place = x;
    k().relu(in_place.data(), in_place.data(), n);
    ExpectSameBits(in_place, want, "relu in place n=" + std::to_string(n));
  }
}

TEST_P(VectorKernelsTest, ReluGradPassesDyWherePositive) {
  for (int64_t n : kSizes) {
    const std::vector<float> dy = Values(n, 2), y = Values(n, 3);
    std::vector<float> want(n), got(n, 7.0f);
    for (int64_t i = 0; i < n; ++i) want[i] = y[i] > 0.0f ? dy[i] : 0.0f;
    k().relu_grad(dy.data(), y.data(), got.data(), n);
    ExpectSameBits(got, want, "relu_grad n=" + std::to_string(n));
  }
}

TEST_P(VectorKernelsTest, AddBiasWithAndWithoutRelu) {
  for (int64_t n : kSizes) {
    const std::vector<float> x = Values(n, 4), b = Values(n, 5);
    for (bool relu : {false, true}) {
      std::vector<float> want(n), got(n, 7.0f);
      for (int64_t i = 0; i < n; ++i) {
        want[i] = relu ? std::max(x[i] + b[i], 0.0f) : x[i] + b[i];
      }
      const std::string what =
          "add_bias relu=" + std::to_string(relu) + " n=" + std::to_string(n);
      k().add_bias(x.data(), b.data(), got.data(), n, relu);
      ExpectSameBits(got, want, what);
      std::vector<float> in_place = x;
      k().add_bias(in_place.data(), b.data(), in_place.data(), n, relu);
      ExpectSameBits(in_place, want, what + " in place");
    }
  }
}

TEST_P(VectorKernelsTest, AccumulateAddsElementwise) {
  for (int64_t n : kSizes) {
    const std::vector<float> x = Values(n, 6);
    std::vector<float> acc = Values(n, 7), want = acc;
    for (int64_t i = 0; i < n; ++i) want[i] += x[i];
    k().accumulate(x.data(), acc.data(), n);
    ExpectSameBits(acc, want, "accumulate n=" + std::to_string(n));
  }
}

TEST_P(VectorKernelsTest, Select4CopiesBits) {
  std::mt19937 gen(8);
  for (int64_t n : kSizes) {
    const std::vector<float> x = Values(n, 9), y = Values(n, 10);
    std::unique_ptr<bool[]> c(new bool[n + 1]);
    std::vector<float> want(n), got(n, 7.0f);
    for (int64_t i = 0; i < n; ++i) {
      c[i] = gen() & 1;
      want[i] = c[i] ? x[i] : y[i];
    }
    k().select4(c.get(), x.data(), y.data(), got.data(), n);
    ExpectSameBits(got, want, "select4 n=" + std::to_string(n));
  }
}

// The kernels must not write past n (the AVX-512 tails are masked stores).
TEST_P(VectorKernelsTest, TailsStayInBounds) {
  for (int64_t n : kSizes) {
    const std::vector<float> x = Values(n + 16, 11);
    std::vector<float> out(n + 16, 7.0f);
    k().relu(x.data(), out.data(), n);
    k().relu_grad(x.data(), x.data(), out.data(), n);
    k().add_bias(x.data(), x.data(), out.data(), n, true);
    k().accumulate(x.data(), out.data(), n);
    for (int64_t i = n; i < n + 16; ++i) {
      ASSERT_EQ(out[i], 7.0f) << "n=" << n << ", index " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, VectorKernelsTest,
                         ::testing::Values(CpuIsa::kAvx2, CpuIsa::kAvx512),
                         [](const auto& info) {
                           return std::string(IsaName(info.param));
                         });

// Under IPUFLOW_MAX_ISA=avx2 (or on an AVX2-only CPU) every kernel used is
// the AVX2 variant.
TEST(UsedVectorKernelsTest, FollowsUsedIsa) {
  const VectorKernels& used = UsedVectorKernels();
  if (UsedIsa() == CpuIsa::kAvx2) {
    const VectorKernels& avx2 = VectorKernelsFor(CpuIsa::kAvx2);
    EXPECT_EQ(used.relu, avx2.relu) << IsaDescription();
    EXPECT_EQ(used.relu_grad, avx2.relu_grad);
    EXPECT_EQ(used.add_bias, avx2.add_bias);
    EXPECT_EQ(used.accumulate, avx2.accumulate);
    EXPECT_EQ(used.select4, avx2.select4);
  }
#ifdef IPUFLOW_EXPECT_AVX2
  EXPECT_EQ(UsedIsa(), CpuIsa::kAvx2) << IsaDescription();
#endif
}

}  // namespace
}  // namespace ipuflow::ops
