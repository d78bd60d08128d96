// ApplyAdam (AdamW, weight_decay 0.01) on the tutorial ConvNet's variables'
// sizes (conv 250 and 5,020, dense 82,176 and 2,570 floats) through a host
// Session, one step per iteration.
//
//   ./bazelw run //ops/state:apply_adam_benchmark -- --benchmark_min_time=0.5
#include <random>

#include "benchmark/benchmark.h"
#include "core/machine_info.h"
#include "core/session.h"
#include "ops/array/const.h"
#include "ops/state/apply_adam.h"
#include "ops/state/variable.h"

namespace ipuflow::ops {
namespace {

Tensor Uniform(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  Tensor t(DType::kFloat32, {n});
  for (float& x : t.span<float>()) x = dist(gen);
  return t;
}

void BM_ApplyAdamW(benchmark::State& state) {
  const int64_t n = state.range(0);
  Scope s = Scope::NewRootScope();
  auto zeros = [&] { return Tensor::Filled(DType::kFloat32, {n}, 0); };
  VariableHandle w = Variable(s.WithOpName("w"), Const(s, Uniform(n, 1)));
  VariableHandle m = Variable(s.WithOpName("m"), Const(s, zeros()));
  VariableHandle v = Variable(s.WithOpName("v"), Const(s, zeros()));
  Output grad = Placeholder(s, DType::kFloat32, {n});
  Node* step = ApplyAdam(s, w.handle, m.handle, v.handle, Const(s, 1e-3f), grad,
                         Const(s, 0.9f), Const(s, 0.999f), Const(s, 1e-8f),
                         Const(s, 1.0f), 0.01f);
  SessionOptions options;
  options.intra_op_threads = static_cast<int>(state.range(1));
  Session session(s.graph(), options);
  absl::Status status = s.ok() ? session.Initialize() : s.status();
  const FeedList feeds = {{grad, Uniform(n, 2)}};
  for (auto _ : state) {
    if (status.ok()) status = session.Run(feeds, {}, {step}, nullptr);
    if (!status.ok()) {
      state.SkipWithError(status.ToString().c_str());
      return;
    }
  }
  state.counters["items"] = benchmark::Counter(
      static_cast<double>(n) * state.iterations(), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_ApplyAdamW)
    ->ArgNames({"n", "intra_op_threads"})
    ->ArgsProduct({{250, 5020, 82176, 2570}, {1}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

const bool kContext = [] {
  benchmark::AddCustomContext("machine", MachineDescription());
  return true;
}();

}  // namespace
}  // namespace ipuflow::ops
