// GroupedConv2D and its two gradients as one-node programs (the executor's
// per-run cost included, as a step pays it) on one thread, batch 8, on the
// shapes that grouped, depthwise and dilated convolutions have in the
// models that use them: MobileNet's depthwise 3x3 (groups = C), ResNeXt's
// 32 groups of 3x3, a dilated 3x3 (DeepLab's atrous convolution), and a
// 1-D speech convolution of width 5 (Conv1D, so H = 1).
//
//   ./bazelw run //ops/nn:grouped_conv_benchmark --
//     --benchmark_min_time=0.5            # (one line)
//
// Counter MAC/s: the convolution's multiply-adds (a backprop costs as many
// as the forward). The context lines print the CPU and the ISA.
#include <array>
#include <string>

#include "benchmark/benchmark.h"
#include "core/scope.h"
#include "core/testing/op_test.h"
#include "ops/array/const.h"
#include "ops/nn/grouped_conv_2d.h"
#include "ops/testing/bench_program.h"

namespace ipuflow::ops {
namespace {

constexpr int64_t kBatch = 8;

struct Case {
  int64_t h, w, c, oc, kh, kw, groups, dilation;
};
constexpr std::array<Case, 4> kCases = {{
    {28, 28, 128, 128, 3, 3, 128, 1},  // MobileNet depthwise.
    {14, 14, 128, 128, 3, 3, 32, 1},   // ResNeXt, 32 groups of 4.
    {32, 32, 32, 32, 3, 3, 1, 2},      // Dilated (atrous).
    {1, 200, 64, 64, 1, 5, 1, 1},      // Conv1D over 200 frames.
}};

enum Pass { kForward, kBackpropInput, kBackpropFilter };

void Run(benchmark::State& state, Pass pass) {
  const Case c = kCases[state.range(0)];
  const TensorShape xs({kBatch, c.h, c.w, c.c});
  const TensorShape fs({c.kh, c.kw, c.c / c.groups, c.oc});
  const TensorShape ys({kBatch, c.h, c.w, c.oc});  // SAME, stride 1.
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, xs);
  Output f = Placeholder(s, DType::kFloat32, fs);
  Output dy = Placeholder(s, DType::kFloat32, ys);
  const AttrMap attrs = {
      {"strides", std::vector<int64_t>{1, 1}},
      {"dilations", std::vector<int64_t>{c.dilation, c.dilation}},
      {"padding", std::string("SAME")},
      {"groups", c.groups}};
  const char* op = pass == kForward         ? "GroupedConv2D"
                   : pass == kBackpropInput ? "GroupedConv2DBackpropInput"
                                            : "GroupedConv2DBackpropFilter";
  std::vector<Output> in = {x, f};
  if (pass != kForward) in.push_back(dy);
  Output out(s.AddNode(op, in, attrs));
  std::vector<Tensor> values = {testing::RandomTensor(xs, -1, 1, 1),
                                testing::RandomTensor(fs, -1, 1, 2)};
  if (pass != kForward) values.push_back(testing::RandomTensor(ys, -1, 1, 3));
  if (!testing::RunProgramPerIteration(state, s, in, values, {out},
                                       /*intra_op_threads=*/0)) {
    return;
  }
  const double macs = static_cast<double>(kBatch) * c.h * c.w * c.kh * c.kw *
                      (c.c / c.groups) * c.oc;
  state.counters["MAC"] = benchmark::Counter(macs * state.iterations(),
                                             benchmark::Counter::kIsRate);
}

void Args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"case"})->DenseRange(0, kCases.size() - 1);
  b->Unit(benchmark::kMicrosecond)->UseRealTime();
}

void BM_GroupedConv2D(benchmark::State& s) { Run(s, kForward); }
void BM_GroupedConv2DBackpropInput(benchmark::State& s) {
  Run(s, kBackpropInput);
}
void BM_GroupedConv2DBackpropFilter(benchmark::State& s) {
  Run(s, kBackpropFilter);
}
BENCHMARK(BM_GroupedConv2D)->Apply(Args);
BENCHMARK(BM_GroupedConv2DBackpropInput)->Apply(Args);
BENCHMARK(BM_GroupedConv2DBackpropFilter)->Apply(Args);

}  // namespace
}  // namespace ipuflow::ops
