// ThreadPool::ParallelFor's fork-join on loops of known cost, with 0, 1 and
// 2 workers besides the caller: the split rule (ShardCount) keeps small
// loops on the caller, and on a 2-core machine 2 workers must time as 1
// (issue 12: intra-op threads, two must never be slower than one).
//
//   ./bazelw run //core:thread_pool_benchmark -- --benchmark_min_time=0.5
//
// BM_ParallelFor/<cycles>/workers:<w>: one loop of 64 units of about
// cycles/64 cycles each (a dependent chain of multiply-adds, told to the
// pool as its cost), per iteration. The context prints the CPU.
#include <cstdint>

#include "benchmark/benchmark.h"
#include "core/machine_info.h"
#include "core/thread_pool.h"

namespace ipuflow {
namespace {

constexpr int64_t kUnits = 64;

// About `cycles` cycles of dependent multiply-adds (4 cycles each).
inline float Spin(int64_t cycles, float x) {
  for (int64_t i = 0; i < cycles / 4; ++i) x = x * 0.999f + 0.5f;
  return x;
}

void BM_ParallelFor(benchmark::State& state) {
  const int64_t cycles = state.range(0);
  ThreadPool pool("bench", static_cast<int>(state.range(1)));
  const int64_t per_unit = cycles / kUnits;
  float sink[kUnits] = {};
  for (auto _ : state) {
    pool.ParallelFor(kUnits, static_cast<double>(per_unit),
                     [&](int64_t b, int64_t e) {
                       for (int64_t i = b; i < e; ++i) {
                         sink[i] = Spin(per_unit, sink[i]);
                       }
                     });
    benchmark::DoNotOptimize(sink);
  }
  state.counters["shards"] = static_cast<double>(ThreadPool::ShardCount(
      kUnits, static_cast<double>(per_unit), pool.Parallelism()));
}
BENCHMARK(BM_ParallelFor)
    ->ArgNames({"cycles", "workers"})
    ->ArgsProduct({{20000, 100000, 400000, 2000000}, {0, 1, 2}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

const bool kContext = [] {
  benchmark::AddCustomContext("machine", MachineDescription());
  return true;
}();

}  // namespace
}  // namespace ipuflow
