// ipuflow's AVX-512 code is safe from GCC 12.2's constant-store miscompile
// (gcc_avx512_slp_repro.cc): the stores it gets wrong, compiled with the
// flags every AVX-512 kernel library uses, put the right values in memory.
#include "core/cpu_isa.h"
#include "gtest/gtest.h"
#include "tests/toolchain/slp_constant_store.h"

namespace ipuflow::toolchain {
namespace {

bool HasAvx512() {
  const CpuFeatures& f = DetectedCpuFeatures();
  return f.avx512f && f.avx512vl;
}

TEST(GccAvx512SlpTest, ConstantStoresFromAvx512Code) {
  if (!HasAvx512()) GTEST_SKIP() << "no AVX-512 on this CPU";
  for (Pattern p : kAllPatterns) {
    const std::vector<int64_t> want = Expected(p);
    EXPECT_EQ(StoreWithAvx512(p), want) << "element-wise copy";
    EXPECT_EQ(VectorWithAvx512(p), want) << "std::vector initializer list";
  }
}

}  // namespace
}  // namespace ipuflow::toolchain
