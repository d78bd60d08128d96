// Today's element-wise kernels (VectorMath, exact at the edges) against the
// Eigen 3.4 packet expressions they replaced, side by side in one run:
//
//   ./bazelw run //ops/math:vector_math_benchmark --
//       --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
//
// BM_Eigen<F>/n is the old kernel body (an Eigen array expression over a
// contiguous block, as UnaryKernel ran it), BM_Vec<F>/n the new one, on the
// calling thread; n = 4096 (in L1/L2) and 1 << 20 (from memory). Items per
// second are elements.
#include <random>
#include <vector>

#include "Eigen/Core"
#include "benchmark/benchmark.h"
#include "ops/math/vector_math.h"

namespace ipuflow::ops {
namespace {

using Map = Eigen::Map<Eigen::ArrayXf>;
using ConstMap = Eigen::Map<const Eigen::ArrayXf>;

std::vector<float> Inputs(int64_t n, float lo, float hi) {
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> x(n);
  for (float& v : x) v = u(rng);
  return x;
}

template <typename Body>
void Run(benchmark::State& state, float lo, float hi, Body body) {
  const int64_t n = state.range(0);
  const std::vector<float> x = Inputs(n, lo, hi);
  std::vector<float> y(n);
  for (auto _ : state) {
    body(x.data(), y.data(), n);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * n);
}

#define IPUFLOW_PAIR(NAME, LO, HI, EIGEN_EXPR, VEC)                       \
  void BM_Eigen##NAME(benchmark::State& state) {                          \
    Run(state, LO, HI, [](const float* x, float* y, int64_t n) {          \
      Map(y, n) = ConstMap(x, n).EIGEN_EXPR;                              \
    });                                                                   \
  }                                                                       \
  void BM_Vec##NAME(benchmark::State& state) { Run(state, LO, HI, VEC); } \
  BENCHMARK(BM_Eigen##NAME)->Arg(4096)->Arg(1 << 20);                     \
  BENCHMARK(BM_Vec##NAME)->Arg(4096)->Arg(1 << 20)

IPUFLOW_PAIR(Exp, -10.0f, 10.0f, exp(), VecExp);
IPUFLOW_PAIR(Log, 1e-3f, 100.0f, log(), VecLog);
IPUFLOW_PAIR(Sqrt, 0.0f, 100.0f, sqrt(), VecSqrt);
IPUFLOW_PAIR(Rsqrt, 1e-3f, 100.0f, rsqrt(), VecRsqrt);
IPUFLOW_PAIR(Sigmoid, -10.0f, 10.0f, logistic(), VecSigmoid);

}  // namespace
}  // namespace ipuflow::ops
