// PrefetchBytes: asks the CPU to bring a range into its caches ahead of
// use. For kernels whose inputs come cold from a pipeline's stash (written
// micro-batches earlier) and that read them as more streams than the
// hardware prefetchers follow: a hint, never a fault, any address.
#ifndef IPUFLOW_CORE_PREFETCH_H_
#define IPUFLOW_CORE_PREFETCH_H_

#include <cstdint>

namespace ipuflow {

inline void PrefetchBytes(const void* p, int64_t bytes) {
  const char* c = static_cast<const char*>(p);
  for (int64_t b = 0; b < bytes; b += 64) __builtin_prefetch(c + b);
}

}  // namespace ipuflow

#endif  // IPUFLOW_CORE_PREFETCH_H_
