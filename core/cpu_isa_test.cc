#include "core/cpu_isa.h"

#include <cstdlib>

#include "gtest/gtest.h"

namespace ipuflow {
namespace {

TEST(CpuIsaTest, ParsesTheOverrideValues) {
  EXPECT_EQ(ParseIsa("avx2"), CpuIsa::kAvx2);
  EXPECT_EQ(ParseIsa("AVX2"), CpuIsa::kAvx2);
  EXPECT_EQ(ParseIsa("avx512"), CpuIsa::kAvx512);
  EXPECT_EQ(ParseIsa("avx512_core"), std::nullopt);
  EXPECT_EQ(ParseIsa(""), std::nullopt);
}

// The build's baseline: a CPU without these could not have run this far.
TEST(CpuIsaTest, DetectsTheBaseline) {
  const CpuFeatures& f = DetectedCpuFeatures();
  EXPECT_TRUE(f.avx2);
  EXPECT_TRUE(f.fma);
  EXPECT_TRUE(f.f16c);
}

TEST(CpuIsaTest, UsedIsaIsTheDetectedOneCappedByTheEnvironment) {
  const char* env = std::getenv("IPUFLOW_MAX_ISA");
  CpuIsa want = DetectedIsa();
  if (env != nullptr && *env != '\0') {
    const CpuIsa cap = ParseIsa(env).value_or(CpuIsa::kAvx2);
    if (cap < want) want = cap;
  }
  EXPECT_EQ(UsedIsa(), want) << IsaDescription();
  EXPECT_EQ(IsaCapped(), want != DetectedIsa());
  EXPECT_EQ(IsaDescription().rfind(std::string(IsaName(want)), 0), 0u)
      << IsaDescription();
}

// cpu_isa_avx2_test sets IPUFLOW_MAX_ISA=avx2 and defines this: the
// override must hold on every CPU, whatever the environment test above
// derived.
#ifdef IPUFLOW_EXPECT_AVX2
TEST(CpuIsaTest, OverrideSelectsAvx2) {
  EXPECT_EQ(UsedIsa(), CpuIsa::kAvx2) << IsaDescription();
  EXPECT_EQ(IsaCapped(), DetectedIsa() == CpuIsa::kAvx512);
}
#endif

}  // namespace
}  // namespace ipuflow
