// float16 against float32 at the tutorial ConvNet's sizes (batch 40): the
// whole training step's forward + backward as one program (images/s), and
// its two convolutions' forward and backprops one op per case (MAC/s).
// float16 kernels widen their inputs once, compute in float32 and round
// their outputs once (ops/math/half_io.h); issue 11 asks float16 training
// to keep >= 0.9x float32's images/s, so the conversions must stay cheap.
//
//   ./bazelw run //ops/nn:half_benchmark -- --benchmark_min_time=0.5
//
// The first argument is float16 (1) or float32 (0); "workers" is the number
// of intra-op pool workers besides the caller.
#include <functional>
#include <random>
#include <vector>

#include "benchmark/benchmark.h"
#include "core/gradients.h"
#include "core/program.h"
#include "core/tensor_eigen.h"
#include "core/thread_pool.h"
#include "ops/array/const.h"
#include "ops/array/reshape.h"
#include "ops/math/mat_mul.h"
#include "ops/nn/bias_add.h"
#include "ops/nn/conv2d.h"
#include "ops/nn/conv2d_backprop.h"
#include "ops/nn/max_pool_2d.h"
#include "ops/nn/relu.h"
#include "ops/nn/sparse_softmax_cross_entropy_with_logits.h"
#include "ops/testing/bench_program.h"

namespace ipuflow::ops {
namespace {

constexpr int64_t kBatch = 40;

Tensor Uniform(const TensorShape& shape, uint32_t seed, DType dtype,
               float scale = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  Tensor f(DType::kFloat32, shape);
  for (float& v : f.span<float>()) v = dist(gen);
  if (dtype == DType::kFloat32) return f;
  Tensor h(DType::kFloat16, shape);
  h.flat<half>() = f.flat<float>().cast<half>();
  return h;
}

struct BenchGraph {
  explicit BenchGraph(DType d) : dtype(d) {}
  DType dtype;
  Scope scope = Scope::NewRootScope();
  std::vector<Output> feeds;
  std::vector<Tensor> values;
  std::vector<Output> fetches;
  Output Feed(const Tensor& value) {
    feeds.push_back(Placeholder(scope, value.dtype(), value.shape()));
    values.push_back(value);
    return feeds.back();
  }
  Output Feed(const TensorShape& shape, float scale = 1.0f) {
    return Feed(Uniform(shape, 17 + values.size(), dtype, scale));
  }
};

// Runs the program of `build` once per iteration; `work` per run.
void Run(benchmark::State& state, const std::function<void(BenchGraph&)>& build,
         double work, const char* counter) {
  BenchGraph g(state.range(0) ? DType::kFloat16 : DType::kFloat32);
  build(g);
  if (!testing::RunProgramPerIteration(state, g.scope, g.feeds, g.values,
                                       g.fetches,
                                       static_cast<int>(state.range(1)))) {
    return;
  }
  state.counters[counter] = benchmark::Counter(work * state.iterations(),
                                               benchmark::Counter::kIsRate);
}

// The tutorial ConvNet (examples/models.cc) on placeholders: conv 5x5
// 1->10, bias, max pool 2, relu; conv 5x5 10->20, bias, pool, relu;
// dense 320->256 relu; dense 256->10; mean softmax cross-entropy.
// Fetches the loss and the gradients of the eight weights.
void ConvNetStep(BenchGraph& g) {
  const Scope& s = g.scope;
  Output x = g.Feed({kBatch, 28, 28, 1});
  std::vector<int32_t> labels(kBatch);
  for (int i = 0; i < kBatch; ++i) labels[i] = i % 10;
  Output y = g.Feed(Tensor::FromVector<int32_t>(labels));
  std::vector<Output> w = {g.Feed({5, 5, 1, 10}, 0.3f),  g.Feed({10}, 0.1f),
                           g.Feed({5, 5, 10, 20}, 0.1f), g.Feed({20}, 0.1f),
                           g.Feed({320, 256}, 0.1f),     g.Feed({256}, 0.1f),
                           g.Feed({256, 10}, 0.1f),      g.Feed({10}, 0.1f)};
  Output h = x;
  for (int b = 0; b < 2; ++b) {
    h = Conv2D(s, h, w[2 * b], {1, 1}, "VALID");
    h = BiasAdd(s, h, w[2 * b + 1]);
    h = Relu(s, MaxPool2D(s, h, {2, 2}, {2, 2}, "VALID"));
  }
  h = Reshape(s, h, {-1, 320});
  h = Relu(s, BiasAdd(s, MatMul(s, h, w[4]), w[5]));
  Output logits = BiasAdd(s, MatMul(s, h, w[6]), w[7]);
  Output loss = SoftmaxCrossEntropyLoss(s, logits, y);
  std::vector<Output> grads;
  absl::Status st = AddGradients(s, {loss}, w, {}, &grads);
  if (!st.ok()) return;
  g.fetches = {loss};
  g.fetches.insert(g.fetches.end(), grads.begin(), grads.end());
}

void BM_ConvNetTrainStep(benchmark::State& state) {
  Run(state, ConvNetStep, kBatch, "images/s");
}
BENCHMARK(BM_ConvNetTrainStep)
    ->ArgsProduct({{0, 1}, {0, 1}})
    ->ArgNames({"fp16", "workers"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// The two convolutions: [40, hw, hw, c] by [5, 5, c, oc], VALID.
struct ConvShape {
  int64_t hw, c, oc;
  TensorShape x() const { return {kBatch, hw, hw, c}; }
  TensorShape w() const { return {5, 5, c, oc}; }
  TensorShape y() const { return {kBatch, hw - 4, hw - 4, oc}; }
  double macs() const {
    return double(kBatch) * (hw - 4) * (hw - 4) * 25 * c * oc;
  }
};
const ConvShape kShapes[] = {{28, 1, 10}, {12, 10, 20}};

// state.range(2): 0 forward, 1 backprop input, 2 backprop filter;
// state.range(3): the shape.
void BM_Conv(benchmark::State& state) {
  const ConvShape c = kShapes[state.range(3)];
  const int64_t which = state.range(2);
  Run(
      state,
      [&](BenchGraph& g) {
        Output x = g.Feed(c.x()), w = g.Feed(c.w());
        const Scope& s = g.scope;
        if (which == 0) {
          g.fetches = {Conv2D(s, x, w, {1, 1}, "VALID")};
        } else {
          Output dy = g.Feed(c.y());
          g.fetches = {
              which == 1 ? Conv2DBackpropInput(s, x, w, dy, {1, 1}, "VALID")
                         : Conv2DBackpropFilter(s, x, w, dy, {1, 1}, "VALID")};
        }
      },
      c.macs(), "MAC/s");
}
BENCHMARK(BM_Conv)
    ->ArgsProduct({{0, 1}, {0}, {0, 1, 2}, {0, 1}})
    ->ArgNames({"fp16", "workers", "fwd0_in1_filter2", "B"})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

}  // namespace
}  // namespace ipuflow::ops
