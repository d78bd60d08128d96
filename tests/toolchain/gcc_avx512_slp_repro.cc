// Minimal reproducer of a GCC 12.2 wrong-code bug (Debian 12.2.0-14) that
// ipuflow once worked around by building for x86-64-v3 only. With AVX-512
// enabled (-march=x86-64-v4, or a function's target("avx512f,avx512vl")
// attribute), the SLP vectoriser turns four int64 copies of {1, 1, 1, 0}
// into one 256-bit store of a broadcast: {1, 1, 1, 1} lands in memory.
// Constants whose trailing lanes are zero and leading lanes equal are hit
// ({1, 1, 1, 0}, {2, 2, 2, 0}, {1, 1, 0, 0}); {1, 0, 0, 0} and {1, 2, 3, 0}
// are stored correctly. -fno-tree-slp-vectorize avoids it (bazel/ipuflow.bzl,
// AVX512_COPTS).
//
//   g++ -std=c++17 -O2 -march=x86-64-v4 tests/toolchain/gcc_avx512_slp_repro.cc
//   && ./a.out echo $?   # 1 with the bug; 0 with -fno-tree-slp-vectorize, -O1
//   or x86-64-v3
//
// Deliberately free of ipuflow code (and built with the compiler's defaults
// plus -march=x86-64-v4 by //tests/toolchain:gcc_avx512_slp_repro) so it can
// go into a compiler bug report as it is.
#include <cstdint>
#include <cstdio>

__attribute__((noinline)) int64_t Fourth(const int64_t* p) { return p[3]; }

int main() {
  const int64_t init[4] = {1, 1, 1, 0};
  int64_t* p = new int64_t[4];
  for (int i = 0; i < 4; ++i) p[i] = init[i];
  const int64_t last = Fourth(p);
  delete[] p;
  std::printf("p[3] = %lld (expected 0): %s\n", static_cast<long long>(last),
              last == 0 ? "compiler not affected" : "MISCOMPILED");
  return last == 0 ? 0 : 1;
}
