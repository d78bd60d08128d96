// The dropout mask as a pure function of a 64-bit key and an element's
// position: element i is kept iff its uniform draw u_i in [0, 1) is >= rate,
// u_i a counter-based hash (SplitMix64's finaliser) of (key, i). Shared by
// Dropout (which stores the mask) and IpuDropout (which regenerates it
// from the key in the backward pass); shards need no shared generator.
#ifndef IPUFLOW_OPS_NN_DROPOUT_MASK_H_
#define IPUFLOW_OPS_NN_DROPOUT_MASK_H_

#include <cstdint>

namespace ipuflow::ops {

// SplitMix64's finaliser: a bijective 64-bit mixer.
inline uint64_t DropoutMix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
inline constexpr uint64_t kDropoutGamma = 0x9E3779B97F4A7C15ull;

// The key of one run of a dropout node: its seed attribute, how many times
// it has run in its program, and the replica.
inline uint64_t DropoutKey(uint64_t seed, uint64_t run, uint64_t replica) {
  return DropoutMix(DropoutMix(DropoutMix(seed + kDropoutGamma) + run) +
                    replica);
}

inline bool DropoutKeeps(uint64_t key, int64_t i, float rate) {
  const uint64_t bits =
      DropoutMix(key + (static_cast<uint64_t>(i) + 1) * kDropoutGamma);
  const float u = static_cast<float>(bits >> 40) * (1.0f / (1 << 24));
  return u >= rate;
}

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_NN_DROPOUT_MASK_H_
