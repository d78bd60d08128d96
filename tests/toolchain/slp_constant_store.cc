#include "tests/toolchain/slp_constant_store.h"

namespace ipuflow::toolchain {
namespace {

#define IPUFLOW_AVX512 __attribute__((target("avx512f,avx512vl"), noinline))

// Each pattern is its own function with literal constants: the bug needs
// the values known at compile time.
template <int64_t A, int64_t B, int64_t C, int64_t D>
IPUFLOW_AVX512 std::vector<int64_t> Store() {
  const int64_t init[4] = {A, B, C, D};
  int64_t* p = new int64_t[4];
  for (int i = 0; i < 4; ++i) p[i] = init[i];
  std::vector<int64_t> out(p, p + 4);
  delete[] p;
  return out;
}

template <int64_t A, int64_t B, int64_t C, int64_t D>
IPUFLOW_AVX512 std::vector<int64_t> Vector() {
  return std::vector<int64_t>{A, B, C, D};
}

}  // namespace

std::vector<int64_t> Expected(Pattern p) {
  switch (p) {
    case Pattern::k1110:
      return {1, 1, 1, 0};
    case Pattern::k2220:
      return {2, 2, 2, 0};
    case Pattern::k1100:
      return {1, 1, 0, 0};
    case Pattern::k1000:
      return {1, 0, 0, 0};
    case Pattern::k1230:
      return {1, 2, 3, 0};
  }
  return {};
}

std::vector<int64_t> StoreWithAvx512(Pattern p) {
  switch (p) {
    case Pattern::k1110:
      return Store<1, 1, 1, 0>();
    case Pattern::k2220:
      return Store<2, 2, 2, 0>();
    case Pattern::k1100:
      return Store<1, 1, 0, 0>();
    case Pattern::k1000:
      return Store<1, 0, 0, 0>();
    case Pattern::k1230:
      return Store<1, 2, 3, 0>();
  }
  return {};
}

std::vector<int64_t> VectorWithAvx512(Pattern p) {
  switch (p) {
    case Pattern::k1110:
      return Vector<1, 1, 1, 0>();
    case Pattern::k2220:
      return Vector<2, 2, 2, 0>();
    case Pattern::k1100:
      return Vector<1, 1, 0, 0>();
    case Pattern::k1000:
      return Vector<1, 0, 0, 0>();
    case Pattern::k1230:
      return Vector<1, 2, 3, 0>();
  }
  return {};
}

}  // namespace ipuflow::toolchain
