// The cost of rounding float32 to float16 per element: IEEE nearest (the
// host: Eigen's F16C cast), the device's nearest (with the nanoo /
// saturation pass) and stochastic rounding (esr ON), on one thread over
// 64 Ki elements (L2-resident) of values in [0.5, 2).
//
//   ./bazelw run -c opt //core:half_rounding_benchmark
// Compare the ns per element of the three in the same run.
#include <cmath>

#include "benchmark/benchmark.h"
#include "core/half.h"
#include "core/half_rounding.h"
#include "core/machine_info.h"
#include "core/op_registry.h"
#include "core/session.h"
#include "ops/array/const.h"

namespace ipuflow {
namespace {

constexpr int64_t kN = 1 << 16;
constexpr int kRoundsPerRun = 100;

// _RoundRepeatedly(x) -> float16: RoundToHalf over x, kRoundsPerRun times,
// on the calling thread (no ParallelFor: the cost of one thread).
REGISTER_OP("_RoundRepeatedly")
    .Input("x")
    .SetShapeFn([](ShapeContext& c) {
      c.set_output(0, DType::kFloat16, c.input_shape(0));
      return absl::OkStatus();
    })
    .SetKernel([](KernelContext& ctx) -> absl::Status {
      const Tensor& x = ctx.input(0);
      ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.shape()));
      for (int i = 0; i < kRoundsPerRun; ++i) {
        RoundToHalf(ctx, 0, x.data<float>(), y->data<half>(), x.NumElements(),
                    i * x.NumElements());
      }
      return absl::OkStatus();
    })
    .NotDifferentiable("a benchmark op");

void Run(benchmark::State& state, const FloatingPointBehaviour* fp) {
  std::vector<float> x(kN);
  for (int64_t i = 0; i < kN; ++i) x[i] = 1.25f + 0.74f * std::sin(0.01f * i);
  Scope s = Scope::NewRootScope();
  Output h =
      s.AddNode("_RoundRepeatedly", {ops::Const(s, x, TensorShape({kN}))});
  Session session(s.graph());
  session.env()->floating_point = fp;
  std::vector<Tensor> out;
  for (auto _ : state) {
    IPU_CHECK_OK(session.Run({}, {h}, &out));
    benchmark::DoNotOptimize(out[0].raw_data());
  }
  const double elements =
      static_cast<double>(state.iterations()) * kN * kRoundsPerRun;
  state.SetItemsProcessed(static_cast<int64_t>(elements));
  state.counters["ns_per_element"] = benchmark::Counter(
      elements, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.SetLabel(MachineDescription());
}

void BM_HostNearest(benchmark::State& state) { Run(state, nullptr); }
BENCHMARK(BM_HostNearest)->Unit(benchmark::kMillisecond);

void BM_DeviceNearest(benchmark::State& state) {
  const FloatingPointBehaviour fp;
  Run(state, &fp);
}
BENCHMARK(BM_DeviceNearest)->Unit(benchmark::kMillisecond);

void BM_DeviceStochastic(benchmark::State& state) {
  FloatingPointBehaviour fp;
  fp.esr = StochasticRounding::kOn;
  fp.seed = 1;
  Run(state, &fp);
}
BENCHMARK(BM_DeviceStochastic)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace ipuflow
