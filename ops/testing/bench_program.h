// RunProgramPerIteration: the loop of the op benchmarks (ops/nn/*_benchmark):
// compiles a graph's fetches from fed placeholders once, then runs the
// program once per Google Benchmark iteration on its own intra-op pool.
#ifndef IPUFLOW_OPS_TESTING_BENCH_PROGRAM_H_
#define IPUFLOW_OPS_TESTING_BENCH_PROGRAM_H_

#include <memory>
#include <vector>

#include "benchmark/benchmark.h"
#include "core/program.h"
#include "core/scope.h"
#include "core/thread_pool.h"

namespace ipuflow::testing {

// `values` feed `feeds` in order. On an error (the scope's, compiling or
// running) the benchmark is skipped with it and false returned; the caller
// then sets no counters.
inline bool RunProgramPerIteration(benchmark::State& state, const Scope& scope,
                                   const std::vector<Output>& feeds,
                                   const std::vector<Tensor>& values,
                                   const std::vector<Output>& fetches,
                                   int intra_op_threads) {
  ThreadPool pool("bench-intra", intra_op_threads);
  RunEnv env;
  env.intra_op = &pool;
  ProgramSpec spec;
  spec.feeds = feeds;
  for (const Tensor& v : values) spec.feed_shapes.push_back(v.shape());
  spec.fetches = fetches;
  absl::StatusOr<std::unique_ptr<Program>> program =
      scope.ok() ? Program::Compile(*scope.graph(), spec)
                 : absl::StatusOr<std::unique_ptr<Program>>(scope.status());
  if (!program.ok()) {
    state.SkipWithError(program.status().ToString().c_str());
    return false;
  }
  std::vector<Tensor> out;
  for (auto _ : state) {
    const absl::Status s = (*program)->Run(env, values, &out);
    if (!s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      return false;
    }
    benchmark::DoNotOptimize(out[0].raw_data());
  }
  return true;
}

}  // namespace ipuflow::testing

#endif  // IPUFLOW_OPS_TESTING_BENCH_PROGRAM_H_
