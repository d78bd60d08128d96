// The stores GCC 12.2 miscompiles with AVX-512 (gcc_avx512_slp_repro.cc),
// compiled as ipuflow compiles its AVX-512 code: the build's baseline flags
// plus a target("avx512...") attribute, and AVX512_COPTS (bazel/ipuflow.bzl).
// gcc_avx512_slp_test checks the values that land in memory, so removing the
// workaround from AVX512_COPTS fails CI on any AVX-512 CPU.
#ifndef IPUFLOW_TESTS_TOOLCHAIN_SLP_CONSTANT_STORE_H_
#define IPUFLOW_TESTS_TOOLCHAIN_SLP_CONSTANT_STORE_H_

#include <cstdint>
#include <vector>

namespace ipuflow::toolchain {

// Which of the four-element constants below to store.
enum class Pattern { k1110, k2220, k1100, k1000, k1230 };
inline constexpr Pattern kAllPatterns[] = {Pattern::k1110, Pattern::k2220,
                                           Pattern::k1100, Pattern::k1000,
                                           Pattern::k1230};
std::vector<int64_t> Expected(Pattern p);

// Copies the pattern element by element into fresh memory (as std::vector's
// initializer-list constructor does), from an AVX-512 function. Call only
// when the CPU has AVX-512 F and VL.
std::vector<int64_t> StoreWithAvx512(Pattern p);

// The same through std::vector<int64_t>{...}, as Pad's paddings once were.
std::vector<int64_t> VectorWithAvx512(Pattern p);

}  // namespace ipuflow::toolchain

#endif  // IPUFLOW_TESTS_TOOLCHAIN_SLP_CONSTANT_STORE_H_
