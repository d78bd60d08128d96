// MatMul of square float32 matrices through a host Session, against the raw
// Eigen product of the same data in the same process: the ratio of the two
// flops/s counters is the framework's overhead (graph execution, output
// allocation, the row split over the intra-op pool).
//
//   ./bazelw run //ops/math:mat_mul_benchmark -- --benchmark_min_time=1
//
// BM_SessionMatMul/N/intra_op_threads:0 uses the Session's default intra-op
// pool (cores - 1 workers, the caller meant to take part); :2 asks for two
// workers (examples/convnet_benchmark.cc says why they differ).
// BM_EigenMatMul/N/threads:1 is Eigen's product on the calling thread;
// threads:2 splits the rows of the product in two halves over an
// ipuflow::ThreadPool with one worker, the caller taking the other half.
// BM_OnednnMatMul does the same with oneDNN's sgemm (ops/onednn, one
// oneDNN thread per caller, its JIT kernels for this CPU's widest ISA), and
// BM_OnednnOwnThreadsMatMul gives the whole product to one dnnl_sgemm call
// on `threads` OpenMP threads: oneDNN's own threading, the peer figure.
// The context lines print the CPU and the ISA oneDNN runs; add
// DNNL_MAX_CPU_ISA=AVX2 to the environment to cap oneDNN to AVX2.
#include <omp.h>

#include <algorithm>
#include <random>

#include "Eigen/Core"
#include "benchmark/benchmark.h"
#include "core/session.h"
#include "core/thread_pool.h"
#include "ops/array/const.h"
#include "ops/math/mat_mul.h"
#include "ops/onednn/onednn.h"
#include "ops/onednn/onednn_gemm.h"

namespace ipuflow {
namespace {

using RowMajorMatrix =
    Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMatrixMap = Eigen::Map<const RowMajorMatrix>;
using MatrixMap = Eigen::Map<RowMajorMatrix>;

// An [n, n] float32 tensor of uniform values in [-1, 1).
Tensor RandomMatrix(int64_t n, uint32_t seed) {
  Tensor t(DType::kFloat32, {n, n});
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  float* p = t.data<float>();
  for (int64_t i = 0; i < n * n; ++i) p[i] = dist(gen);
  return t;
}

// 2 n^3 flops per product, as a rate (printed as e.g. "flops=80G/s").
void SetFlops(benchmark::State& state, int64_t n) {
  state.counters["flops"] = benchmark::Counter(
      2.0 * n * n * n * state.iterations(), benchmark::Counter::kIsRate);
}

void BM_SessionMatMul(benchmark::State& state) {
  const int64_t n = state.range(0);
  SessionOptions options;
  options.intra_op_threads = static_cast<int>(state.range(1));
  Scope s = Scope::NewRootScope();
  Output a = ops::Placeholder(s, DType::kFloat32, {n, n});
  Output b = ops::Placeholder(s, DType::kFloat32, {n, n});
  Output c = ops::MatMul(s, a, b);
  Session session(s.graph(), options);
  const FeedList feeds = {{a, RandomMatrix(n, 1)}, {b, RandomMatrix(n, 2)}};
  std::vector<Tensor> out;
  for (auto _ : state) {
    const absl::Status status = session.Run(feeds, {c}, &out);
    if (!status.ok()) {
      state.SkipWithError(status.ToString().c_str());
      break;
    }
    benchmark::DoNotOptimize(out[0].data<float>());
  }
  SetFlops(state, n);
}
BENCHMARK(BM_SessionMatMul)
    ->ArgsProduct({{256, 512, 1024}, {0, 2}})
    ->ArgNames({"", "intra_op_threads"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// The same product with Eigen directly, on `threads` threads (1 or 2).
void BM_EigenMatMul(benchmark::State& state) {
  const int64_t n = state.range(0);
  const int threads = static_cast<int>(state.range(1));
  const Tensor ta = RandomMatrix(n, 1), tb = RandomMatrix(n, 2);
  const ConstMatrixMap a(ta.data<float>(), n, n), b(tb.data<float>(), n, n);
  RowMajorMatrix c(n, n);
  ThreadPool pool("eigen-reference", threads - 1);
  for (auto _ : state) {
    if (threads == 1) {
      c.noalias() = a * b;
    } else {
      // One shard per thread: the split the kernel's cost model picks for
      // products this large.
      const int64_t rows = (n + threads - 1) / threads;
      pool.ParallelFor(threads, 1e9, [&](int64_t begin, int64_t end) {
        for (int64_t t = begin; t < end; ++t) {
          const int64_t r0 = t * rows, r1 = std::min(n, r0 + rows);
          c.middleRows(r0, r1 - r0).noalias() = a.middleRows(r0, r1 - r0) * b;
        }
      });
    }
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  SetFlops(state, n);
}
BENCHMARK(BM_EigenMatMul)
    ->ArgsProduct({{256, 512, 1024}, {1, 2}})
    ->ArgNames({"", "threads"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// The product through ops/onednn: row shares over an ipuflow pool of
// threads - 1 workers and the caller, one single-threaded sgemm each.
void BM_OnednnMatMul(benchmark::State& state) {
  const int64_t n = state.range(0);
  const int threads = static_cast<int>(state.range(1));
  const Tensor ta = RandomMatrix(n, 1), tb = RandomMatrix(n, 2);
  Tensor tc(DType::kFloat32, {n, n});
  ThreadPool pool("onednn", threads - 1);
  const ops::onednn::GemmDims dims{n, n, n, false, false};
  const int64_t index[] = {0};
  for (auto _ : state) {
    ops::onednn::BatchedSgemm(pool, ta.data<float>(), tb.data<float>(),
                              tc.data<float>(), dims, index, index);
    benchmark::DoNotOptimize(tc.data<float>());
    benchmark::ClobberMemory();
  }
  SetFlops(state, n);
}
BENCHMARK(BM_OnednnMatMul)
    ->ArgsProduct({{256, 512, 1024}, {1, 2}})
    ->ArgNames({"", "threads"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// One dnnl_sgemm call over `threads` OpenMP threads (oneDNN's threading).
void BM_OnednnOwnThreadsMatMul(benchmark::State& state) {
  const int64_t n = state.range(0);
  const Tensor ta = RandomMatrix(n, 1), tb = RandomMatrix(n, 2);
  Tensor tc(DType::kFloat32, {n, n});
  omp_set_num_threads(static_cast<int>(state.range(1)));
  for (auto _ : state) {
    dnnl_sgemm('N', 'N', n, n, n, 1.0f, ta.data<float>(), n, tb.data<float>(),
               n, 0.0f, tc.data<float>(), n);
    benchmark::DoNotOptimize(tc.data<float>());
    benchmark::ClobberMemory();
  }
  omp_set_num_threads(1);
  SetFlops(state, n);
}
BENCHMARK(BM_OnednnOwnThreadsMatMul)
    ->ArgsProduct({{256, 512, 1024}, {1, 2}})
    ->ArgNames({"", "threads"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace ipuflow
