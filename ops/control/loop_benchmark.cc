// Host overhead of device loops: Repeat(1000) of a small body on an
// emulated IPU, against 1000 host Session::Run calls of the same body.
//
//   ./bazelw run //ops/control:loop_benchmark
// Compare the two per-iteration times side by side (same run, same load).
#include "benchmark/benchmark.h"
#include "core/ipu/ipu_strategy.h"
#include "core/session.h"
#include "ops/array/const.h"
#include "ops/control/loops.h"
#include "ops/math/add.h"
#include "ops/math/mul.h"

namespace ipuflow {
namespace {

constexpr int kIterations = 1000;

// The body: v = v * 0.5 + 1 over 16 floats.
Output Body(const Scope& s, Output v) {
  return ops::Add(s, ops::Mul(s, v, ops::Const(s, 0.5f)), ops::Const(s, 1.0f));
}

void BM_DeviceRepeat(benchmark::State& state) {
  auto system = std::move(IPUSystem::Create(IPUConfig())).value();
  Scope s = Scope::NewRootScope();
  auto loop =
      loops::Repeat(s, kIterations,
                    [](const Scope& b, const std::vector<Output>& a) {
                      return std::vector<Output>{Body(b, a[0])};
                    },
                    {ops::Const(s, Tensor::Filled(DType::kFloat32, {16}, 0))});
  IPUStrategy strategy(system.get());
  for (auto _ : state) {
    auto out = strategy.Run(*s.graph(), loop->outputs);
    benchmark::DoNotOptimize(out);
  }
  state.SetItemsProcessed(state.iterations() * kIterations);
  state.counters["ns_per_loop_iteration"] = benchmark::Counter(
      state.iterations() * kIterations,
      benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_DeviceRepeat)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_HostCalls(benchmark::State& state) {
  Scope s = Scope::NewRootScope();
  Output v = ops::Placeholder(s, DType::kFloat32, {16});
  Output next = Body(s, v);
  SessionOptions options;
  options.inter_op_threads = 0;
  Session session(s.graph(), options);
  Tensor value = Tensor::Filled(DType::kFloat32, {16}, 0);
  std::vector<Tensor> out;
  for (auto _ : state) {
    for (int i = 0; i < kIterations; ++i) {
      (void)session.Run({{v, value}}, {next}, &out);
      value = out[0];
    }
  }
  state.SetItemsProcessed(state.iterations() * kIterations);
  state.counters["ns_per_loop_iteration"] = benchmark::Counter(
      state.iterations() * kIterations,
      benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_HostCalls)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace ipuflow
