// Counter-based random bits: stateless mixers that turn a key and a counter
// into well-distributed bits, so a value drawn for element i depends only on
// (key, i), never on the thread or the chunk that computes it. Used by
// stochastic rounding (half_rounding.cc) and the random ops.
//
//   uint64_t key = Mix64(seed ^ Mix64(node_id));
//   uint32_t bits =
//       Mix32(Mix32(uint32_t(i) ^ uint32_t(key)) ^ uint32_t(key >> 32));
//
// Thread safety: pure functions.
#ifndef IPUFLOW_CORE_HASH_MIX_H_
#define IPUFLOW_CORE_HASH_MIX_H_

#include <cstdint>
#include <string_view>

namespace ipuflow {

inline constexpr uint64_t kGoldenGamma = 0x9e3779b97f4a7c15ULL;  // 2^64 / phi.

// SplitMix64's finaliser: a bijection of 64 bits with full avalanche.
constexpr uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// A 32-bit bijection with low bias (Wellons' "lowbias32"): 32-bit multiplies
// only, so loops over elements vectorise (AVX2 has no 64-bit multiply).
constexpr uint32_t Mix32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352dU;
  x ^= x >> 15;
  x *= 0x846ca68bU;
  x ^= x >> 16;
  return x;
}

// FNV-1a: a hash of a string that is stable across processes (absl::Hash is
// salted per process).
constexpr uint64_t HashString(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char ch : s) h = (h ^ ch) * 0x100000001b3ULL;
  return h;
}

}  // namespace ipuflow

#endif  // IPUFLOW_CORE_HASH_MIX_H_
