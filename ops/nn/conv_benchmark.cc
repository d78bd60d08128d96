// The ops of the tutorial ConvNet's convolution blocks at batch 40, one op
// per case, on one thread (an intra-op pool of 0 workers, as on each
// emulated IPU of the pipelined example), plus block B1 (Conv2D 1->10 k5,
// BiasAdd, MaxPool 2, ReLU) forward and forward + backward as one program.
//
//   ./bazelw run //ops/nn:conv_benchmark -- --benchmark_min_time=0.5
//
// B1 was the pipeline's bottleneck stage. The B2 (Conv2D 10->20 k5) cases
// and BM_Conv2D* over kMoreShapes time the convolutions on either side of
// the limits that choose between conv_small.h's direct kernels and the GEMM
// path. Counters: MAC/s for the convolutions (multiply-adds of the op; a
// backprop costs as many as the forward), items/s for the others. The
// "workers" argument is the number of pool workers besides the caller.
//
// BM_B*_Onednn* run the same convolutions through ops/onednn directly (no
// graph): oneDNN's primitives with one oneDNN thread per caller and the
// batch split over the pool, beside the op cases, with 0 and 1 workers.
// The context lines print the CPU and the ISA oneDNN runs
// (DNNL_MAX_CPU_ISA=AVX2 in the environment caps it).
#include <algorithm>
#include <array>
#include <functional>
#include <random>
#include <vector>

#include "benchmark/benchmark.h"
#include "core/cpu_isa.h"
#include "core/gradients.h"
#include "core/program.h"
#include "core/thread_pool.h"
#include "ops/array/const.h"
#include "ops/nn/bias_add.h"
#include "ops/nn/conv2d.h"
#include "ops/nn/conv2d_backprop.h"
#include "ops/nn/conv_small.h"
#include "ops/nn/conv_sparse_grad.h"
#include "ops/nn/max_pool_2d.h"
#include "ops/nn/relu.h"
#include "ops/onednn/onednn.h"
#include "ops/onednn/onednn_conv.h"
#include "ops/testing/bench_program.h"

namespace ipuflow::ops {
namespace {

constexpr int64_t kBatch = 40;

Tensor Uniform(const TensorShape& shape, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  Tensor t(DType::kFloat32, shape);
  for (float& v : t.span<float>()) v = dist(gen);
  return t;
}

// A graph of placeholders (fed with uniform [-1, 1) values unless given)
// and fetches.
struct BenchGraph {
  Scope scope = Scope::NewRootScope();
  std::vector<Output> feeds;
  std::vector<Tensor> values;
  std::vector<Output> fetches;
  Output Feed(const TensorShape& shape) {
    return Feed(Uniform(shape, 17 + values.size()));
  }
  Output Feed(const Tensor& value) {
    feeds.push_back(Placeholder(scope, DType::kFloat32, value.shape()));
    values.push_back(value);
    return feeds.back();
  }
};

// Runs the graph `build` makes once per iteration; `work` is the MACs or
// items of one run, reported as a rate.
void RunGraph(benchmark::State& state,
              const std::function<void(BenchGraph&)>& build, double work,
              const char* counter) {
  BenchGraph g;
  build(g);
  if (!testing::RunProgramPerIteration(state, g.scope, g.feeds, g.values,
                                       g.fetches,
                                       static_cast<int>(state.range(0)))) {
    return;
  }
  state.counters[counter] = benchmark::Counter(work * state.iterations(),
                                               benchmark::Counter::kIsRate);
}

// A VALID convolution of [40, hw, hw, c] by [k, k, c, oc].
struct ConvShape {
  int64_t hw, c, oc, k = 5;
  TensorShape x() const { return {kBatch, hw, hw, c}; }
  TensorShape w() const { return {k, k, c, oc}; }
  TensorShape y() const { return {kBatch, hw - k + 1, hw - k + 1, oc}; }
  double macs() const {
    return double(kBatch) * (hw - k + 1) * (hw - k + 1) * k * k * c * oc;
  }
};
constexpr ConvShape kB1{28, 1, 10};
constexpr ConvShape kB2{12, 10, 20};
const TensorShape kB1Conv({kBatch, 24, 24, 10});  // B1's conv output.
const TensorShape kB1Pool({kBatch, 12, 12, 10});  // B1's pooled output.

void ConvForward(benchmark::State& state, ConvShape c) {
  RunGraph(
      state,
      [&](BenchGraph& g) {
        Output x = g.Feed(c.x()), w = g.Feed(c.w());
        g.fetches = {Conv2D(g.scope, x, w, {1, 1}, "VALID")};
      },
      c.macs(), "MAC");
}

void ConvBackpropFilter(benchmark::State& state, ConvShape c) {
  RunGraph(
      state,
      [&](BenchGraph& g) {
        Output x = g.Feed(c.x()), w = g.Feed(c.w()), dy = g.Feed(c.y());
        g.fetches = {Conv2DBackpropFilter(g.scope, x, w, dy, {1, 1}, "VALID")};
      },
      c.macs(), "MAC");
}

void ConvBackpropInput(benchmark::State& state, ConvShape c) {
  RunGraph(
      state,
      [&](BenchGraph& g) {
        Output x = g.Feed(c.x()), w = g.Feed(c.w()), dy = g.Feed(c.y());
        g.fetches = {Conv2DBackpropInput(g.scope, x, w, dy, {1, 1}, "VALID")};
      },
      c.macs(), "MAC");
}

// dy as a convolution followed by 2x2 max pooling and ReLU passes it back:
// one nonzero per 2x2 window and channel, and a third of those zeroed too
// (about 16% nonzero, as measured in the main example), which takes
// conv_sparse_grad.h's kernels.
Tensor PooledDy(const TensorShape& y, uint32_t seed) {
  Tensor t = Uniform(y, seed);
  std::mt19937 gen(seed + 1);
  const int64_t n = y.dim(0), h = y.dim(1), w = y.dim(2), c = y.dim(3);
  float* p = t.data<float>();
  for (int64_t b = 0; b < n; ++b)
    for (int64_t i = 0; i < h; i += 2)
      for (int64_t j = 0; j < w; j += 2)
        for (int64_t o = 0; o < c; ++o) {
          const int keep = gen() % 4, alive = gen() % 3 != 0;
          for (int q = 0; q < 4; ++q) {
            const int64_t ii = i + q / 2, jj = j + q % 2;
            if (ii >= h || jj >= w) continue;
            if (q != keep || !alive) p[((b * h + ii) * w + jj) * c + o] = 0;
          }
        }
  return t;
}

void ConvBackpropPooledDy(benchmark::State& state, ConvShape c, bool filter) {
  RunGraph(
      state,
      [&](BenchGraph& g) {
        Output x = g.Feed(c.x()), w = g.Feed(c.w());
        Output dy = g.Feed(PooledDy(c.y(), 5));
        g.fetches = {
            filter ? Conv2DBackpropFilter(g.scope, x, w, dy, {1, 1}, "VALID")
                   : Conv2DBackpropInput(g.scope, x, w, dy, {1, 1}, "VALID")};
      },
      c.macs(), "MAC");
}

// conv_sparse_grad.h's kernels called directly (no graph) on B2 with the
// pooled dy, one thread, with the AVX2 (isa:0) or AVX-512 (isa:1) inner
// loops: an A/B in one process (isa:1 is skipped where UsedIsa() is AVX2).
void BM_B2_SparseConvGradPooledDy(benchmark::State& state) {
  const bool filter = state.range(0) != 0;
  const CpuIsa isa = state.range(1) != 0 ? CpuIsa::kAvx512 : CpuIsa::kAvx2;
  if (isa == CpuIsa::kAvx512 && UsedIsa() != CpuIsa::kAvx512) {
    state.SkipWithError("AVX-512 not in use (CPU or IPUFLOW_MAX_ISA)");
    return;
  }
  const ConvShape c = kB2;
  const int64_t o = c.hw - c.k + 1;
  const Window2D g{kBatch, c.hw, c.hw, c.c, c.k, c.k, 1, 1, o, o, 0, 0};
  const Tensor x = Uniform(c.x(), 1), w = Uniform(c.w(), 2);
  const Tensor dy = PooledDy(c.y(), 5);
  Tensor out(DType::kFloat32, filter ? c.w() : c.x());
  ThreadPool pool("bench-sparse", 0);
  for (auto _ : state) {
    if (filter) {
      SparseConvBackpropFilter(pool, isa, x.data<float>(), dy.data<float>(),
                               out.data<float>(), g, c.oc);
    } else {
      SparseConvBackpropInput(pool, isa, dy.data<float>(), w.data<float>(),
                              out.data<float>(), g, c.oc);
    }
    benchmark::ClobberMemory();
  }
  state.counters["MAC"] = benchmark::Counter(c.macs() * state.iterations(),
                                             benchmark::Counter::kIsRate);
}
BENCHMARK(BM_B2_SparseConvGradPooledDy)
    ->ArgNames({"filter", "isa"})
    ->ArgsProduct({{0, 1}, {0, 1}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

enum class ConvPass { kForward, kBackpropInput, kBackpropFilter };

// One convolution through ops/onednn on random data.
void OnednnConv(benchmark::State& state, ConvShape c, ConvPass pass) {
  ThreadPool pool("bench-onednn", static_cast<int>(state.range(0)));
  const Tensor x = Uniform(c.x(), 1), w = Uniform(c.w(), 2),
               dy = Uniform(c.y(), 3);
  Tensor out(DType::kFloat32, pass == ConvPass::kForward         ? c.y()
                              : pass == ConvPass::kBackpropInput ? c.x()
                                                                 : c.w());
  const int64_t o = c.hw - c.k + 1;
  const onednn::ConvDims d{kBatch, c.hw, c.hw, c.c, c.oc, c.k, c.k,
                           1,      1,    o,    o,   0,    0};
  for (auto _ : state) {
    absl::Status status;
    switch (pass) {
      case ConvPass::kForward:
        status = onednn::ConvForward(pool, x.data<float>(), w.data<float>(),
                                     out.data<float>(), d);
        break;
      case ConvPass::kBackpropInput:
        status = onednn::ConvBackwardData(
            pool, dy.data<float>(), w.data<float>(), out.data<float>(), d);
        break;
      case ConvPass::kBackpropFilter:
        status = onednn::ConvBackwardWeights(
            pool, x.data<float>(), dy.data<float>(), out.data<float>(), d);
        break;
    }
    if (!status.ok()) {
      state.SkipWithError(status.ToString().c_str());
      return;
    }
    benchmark::DoNotOptimize(out.data<float>());
  }
  state.counters["MAC"] = benchmark::Counter(c.macs() * state.iterations(),
                                             benchmark::Counter::kIsRate);
}

void BM_B1_Conv2D(benchmark::State& s) { ConvForward(s, kB1); }
void BM_B1_Conv2DBackpropFilter(benchmark::State& s) {
  ConvBackpropFilter(s, kB1);
}
void BM_B1_Conv2DBackpropInput(benchmark::State& s) {
  ConvBackpropInput(s, kB1);
}
void BM_B1_OnednnConv2D(benchmark::State& s) {
  OnednnConv(s, kB1, ConvPass::kForward);
}
void BM_B1_OnednnConv2DBackpropFilter(benchmark::State& s) {
  OnednnConv(s, kB1, ConvPass::kBackpropFilter);
}
void BM_B1_OnednnConv2DBackpropInput(benchmark::State& s) {
  OnednnConv(s, kB1, ConvPass::kBackpropInput);
}
void BM_B1_Conv2DBackpropFilterPooledDy(benchmark::State& s) {
  ConvBackpropPooledDy(s, kB1, /*filter=*/true);
}
void BM_B2_Conv2DBackpropFilterPooledDy(benchmark::State& s) {
  ConvBackpropPooledDy(s, kB2, /*filter=*/true);
}
void BM_B2_Conv2DBackpropInputPooledDy(benchmark::State& s) {
  ConvBackpropPooledDy(s, kB2, /*filter=*/false);
}
void BM_B2_Conv2D(benchmark::State& s) { ConvForward(s, kB2); }
void BM_B2_OnednnConv2D(benchmark::State& s) {
  OnednnConv(s, kB2, ConvPass::kForward);
}
void BM_B2_OnednnConv2DBackpropFilter(benchmark::State& s) {
  OnednnConv(s, kB2, ConvPass::kBackpropFilter);
}
void BM_B2_OnednnConv2DBackpropInput(benchmark::State& s) {
  OnednnConv(s, kB2, ConvPass::kBackpropInput);
}
void BM_B2_Conv2DBackpropFilter(benchmark::State& s) {
  ConvBackpropFilter(s, kB2);
}
void BM_B2_Conv2DBackpropInput(benchmark::State& s) {
  ConvBackpropInput(s, kB2);
}
// Shapes beyond B1 and B2 (hw, c, oc, k), on either side of the limits of
// conv_small.h's direct kernels.
constexpr std::array<std::array<int64_t, 4>, 12> kMoreShapes = {{
    {28, 1, 32, 5},
    {28, 3, 32, 5},
    {28, 3, 16, 5},
    {16, 8, 32, 5},
    {16, 32, 32, 3},
    {16, 32, 24, 3},
    {16, 16, 16, 5},
    {16, 64, 16, 3},
    {16, 64, 64, 3},
    {10, 128, 16, 3},
    {16, 64, 16, 1},
    {16, 256, 16, 1},
}};
void ConvArgs(benchmark::internal::Benchmark* b) {
  b->ArgNames({"workers", "hw", "c", "oc", "k"});
  for (const auto& [hw, c, oc, k] : kMoreShapes) b->Args({0, hw, c, oc, k});
  b->Unit(benchmark::kMicrosecond)->UseRealTime();
}
ConvShape ShapeArgs(const benchmark::State& s) {
  return {s.range(1), s.range(2), s.range(3), s.range(4)};
}
// Conv2D around B2's 20 output channels, where conv_small.cc chooses
// between the channel packets (AVX2's, or AVX-512's zmm for 9-16) and, on
// AVX-512, conv_rows_avx512.h's pixel-row loop (9-12, 17-24 channels):
// rows of 8 output pixels (as B2) with patches of 75 to 250 floats, rows
// of 24 with 1 to 6 input channels, and of 14, 12 and 10 (blocks of 8
// spanning two rows); 10 and 12 channels as B2, and B1 (1->10).
constexpr std::array<std::array<int64_t, 4>, 14> kPixelRowShapes = {{
    {12, 10, 17, 5},
    {12, 10, 24, 5},
    {28, 1, 20, 5},
    {28, 3, 20, 5},
    {28, 6, 20, 5},
    {16, 8, 20, 3},
    {16, 16, 24, 5},
    {16, 32, 24, 3},
    {12, 6, 20, 5},
    {12, 3, 20, 5},
    {12, 10, 20, 3},
    {12, 10, 10, 5},
    {12, 10, 12, 5},
    {28, 1, 10, 5},
}};
void PixelRowArgs(benchmark::internal::Benchmark* b) {
  b->ArgNames({"workers", "hw", "c", "oc", "k"});
  for (const auto& [hw, c, oc, k] : kPixelRowShapes) b->Args({0, hw, c, oc, k});
  b->Unit(benchmark::kMicrosecond)->UseRealTime();
}
void BM_Conv2D(benchmark::State& s) { ConvForward(s, ShapeArgs(s)); }
void BM_Conv2DPixelRows(benchmark::State& s) { ConvForward(s, ShapeArgs(s)); }
// The same with conv_small.cc's choice overridden, whatever the shape:
// loop:0 the AVX2 channel packets, 1 the AVX-512 ones (zmm, channel tails
// masked), 2 the pixel-row loop (where it takes oc; else as 1): an A/B/C
// in one process for its selection rule (1 and 2 are skipped without
// AVX-512).
void BM_Conv2DPixelRowsForced(benchmark::State& s) {
  const int loop = static_cast<int>(s.range(5));
  if (loop > 0 && UsedIsa() != CpuIsa::kAvx512) {
    s.SkipWithError("AVX-512 not in use (CPU or IPUFLOW_MAX_ISA)");
    return;
  }
  SetSmallConvIsaForTesting(loop > 0 ? CpuIsa::kAvx512 : CpuIsa::kAvx2);
  SetSmallConvRowsForTesting(loop == 2);
  ConvForward(s, ShapeArgs(s));
  SetSmallConvRowsForTesting(std::nullopt);
  SetSmallConvIsaForTesting(std::nullopt);
}
void PixelRowForcedArgs(benchmark::internal::Benchmark* b) {
  b->ArgNames({"workers", "hw", "c", "oc", "k", "loop"});
  for (const auto& [hw, c, oc, k] : kPixelRowShapes) {
    for (int loop : {0, 1, 2}) b->Args({0, hw, c, oc, k, loop});
  }
  b->Unit(benchmark::kMicrosecond)->UseRealTime();
}
void BM_Conv2DBackpropFilter(benchmark::State& s) {
  ConvBackpropFilter(s, ShapeArgs(s));
}
void BM_Conv2DBackpropInput(benchmark::State& s) {
  ConvBackpropInput(s, ShapeArgs(s));
}
void BM_OnednnConv2D(benchmark::State& s) {
  OnednnConv(s, ShapeArgs(s), ConvPass::kForward);
}
void BM_OnednnConv2DBackpropInput(benchmark::State& s) {
  OnednnConv(s, ShapeArgs(s), ConvPass::kBackpropInput);
}
void BM_OnednnConv2DBackpropFilter(benchmark::State& s) {
  OnednnConv(s, ShapeArgs(s), ConvPass::kBackpropFilter);
}

// One op on B1's activations; `items` is its output's element count.
void Elementwise(benchmark::State& state,
                 const std::function<Output(BenchGraph&)>& op, double items) {
  RunGraph(
      state, [&](BenchGraph& g) { g.fetches = {op(g)}; }, items, "items");
}

void BM_B1_BiasAdd(benchmark::State& s) {
  Elementwise(
      s,
      [](BenchGraph& g) {
        return BiasAdd(g.scope, g.Feed(kB1Conv), g.Feed(TensorShape({10})));
      },
      kB1Conv.num_elements());
}
void BM_B1_MaxPool2D(benchmark::State& s) {
  Elementwise(
      s,
      [](BenchGraph& g) {
        return MaxPool2D(g.scope, g.Feed(kB1Conv), {2, 2}, {2, 2}, "VALID");
      },
      kB1Conv.num_elements());
}
void BM_B1_Relu(benchmark::State& s) {
  Elementwise(
      s, [](BenchGraph& g) { return Relu(g.scope, g.Feed(kB1Pool)); },
      kB1Pool.num_elements());
}
void BM_B1_ReluGrad(benchmark::State& s) {
  Elementwise(
      s,
      [](BenchGraph& g) {
        return ReluGrad(g.scope, g.Feed(kB1Pool), g.Feed(kB1Pool));
      },
      kB1Pool.num_elements());
}
// x and y = MaxPool2D(x, 2x2, stride 2) as MaxPoolGrad's inputs.
void PooledPair(const TensorShape& shape, Tensor* x, Tensor* y) {
  *x = Uniform(shape, 5);
  const int64_t n = shape.dim(0), h = shape.dim(1) / 2, w = shape.dim(2) / 2,
                c = shape.dim(3);
  *y = Tensor(DType::kFloat32, {n, h, w, c});
  const float* px = x->data<float>();
  float* py = y->data<float>();
  for (int64_t i = 0; i < n * h; ++i)
    for (int64_t j = 0; j < w; ++j)
      for (int64_t ch = 0; ch < c; ++ch) {
        const float* p = px + ((2 * i * w + j) * 2 * c) + ch;
        py[(i * w + j) * c + ch] = std::max(
            std::max(p[0], p[c]), std::max(p[2 * w * c], p[2 * w * c + c]));
      }
}
void BM_B1_MaxPoolGrad(benchmark::State& s) {
  Elementwise(
      s,
      [](BenchGraph& g) {
        Tensor x, y;
        PooledPair(kB1Conv, &x, &y);
        return MaxPoolGrad(g.scope, g.Feed(x), g.Feed(y), g.Feed(kB1Pool),
                           {2, 2}, {2, 2}, "VALID");
      },
      kB1Conv.num_elements());
}
void BM_B1_BiasAddGrad(benchmark::State& s) {
  Elementwise(
      s, [](BenchGraph& g) { return BiasAddGrad(g.scope, g.Feed(kB1Conv)); },
      kB1Conv.num_elements());
}

// A convolution block as in models::ConvNet (Conv2D, BiasAdd, MaxPool 2,
// ReLU); with `backward`, also the gradients of <dy, block(x)> with respect
// to the filter and bias, and to x unless the block is the first stage
// (B1), as the pipelined example's stages compute them.
void ConvBlock(benchmark::State& state, ConvShape c, bool backward) {
  RunGraph(
      state,
      [&](BenchGraph& g) {
        const Scope& s = g.scope;
        Output x = g.Feed(c.x()), w = g.Feed(c.w());
        Output b = g.Feed(TensorShape({c.oc}));
        Output y = BiasAdd(s, Conv2D(s, x, w, {1, 1}, "VALID"), b);
        y = Relu(s, MaxPool2D(s, y, {2, 2}, {2, 2}, "VALID"));
        g.fetches = {y};
        if (!backward) return;
        Output dy = g.Feed(y.shape());
        std::vector<Output> xs = {w, b};
        if (c.c > 1) xs.push_back(x);
        std::vector<Output> grads;
        absl::Status status = AddGradients(s, {y}, xs, {dy}, &grads);
        if (!status.ok()) s.UpdateStatus(status);
        g.fetches.insert(g.fetches.end(), grads.begin(), grads.end());
      },
      kBatch, "images");
}
void BM_B1_Forward(benchmark::State& s) { ConvBlock(s, kB1, false); }
void BM_B1_ForwardBackward(benchmark::State& s) { ConvBlock(s, kB1, true); }
void BM_B2_ForwardBackward(benchmark::State& s) { ConvBlock(s, kB2, true); }

void Args(benchmark::internal::Benchmark* b) {
  b->ArgName("workers")->Arg(0)->Unit(benchmark::kMicrosecond)->UseRealTime();
}
// The convolutions side by side with oneDNN, on one and two threads.
void ConvPassArgs(benchmark::internal::Benchmark* b) {
  b->ArgName("workers")->Arg(0)->Arg(1);
  b->Unit(benchmark::kMicrosecond)->UseRealTime();
}

BENCHMARK(BM_B1_Conv2D)->Apply(ConvPassArgs);
BENCHMARK(BM_B1_OnednnConv2D)->Apply(ConvPassArgs);
BENCHMARK(BM_B1_BiasAdd)->Apply(Args);
BENCHMARK(BM_B1_MaxPool2D)->Apply(Args);
BENCHMARK(BM_B1_Relu)->Apply(Args);
BENCHMARK(BM_B1_ReluGrad)->Apply(Args);
BENCHMARK(BM_B1_MaxPoolGrad)->Apply(Args);
BENCHMARK(BM_B1_BiasAddGrad)->Apply(Args);
BENCHMARK(BM_B1_Conv2DBackpropFilter)->Apply(ConvPassArgs);
BENCHMARK(BM_B1_OnednnConv2DBackpropFilter)->Apply(ConvPassArgs);
BENCHMARK(BM_B1_Conv2DBackpropInput)->Apply(ConvPassArgs);
BENCHMARK(BM_B1_OnednnConv2DBackpropInput)->Apply(ConvPassArgs);
BENCHMARK(BM_B1_Forward)->Apply(Args);
BENCHMARK(BM_B1_ForwardBackward)->Apply(Args);
BENCHMARK(BM_B1_Conv2DBackpropFilterPooledDy)->Apply(Args);
BENCHMARK(BM_B2_Conv2DBackpropFilterPooledDy)->Apply(Args);
BENCHMARK(BM_B2_Conv2DBackpropInputPooledDy)->Apply(Args);
BENCHMARK(BM_B2_Conv2D)->Apply(ConvPassArgs);
BENCHMARK(BM_B2_OnednnConv2D)->Apply(ConvPassArgs);
BENCHMARK(BM_B2_Conv2DBackpropFilter)->Apply(ConvPassArgs);
BENCHMARK(BM_B2_OnednnConv2DBackpropFilter)->Apply(ConvPassArgs);
BENCHMARK(BM_B2_Conv2DBackpropInput)->Apply(ConvPassArgs);
BENCHMARK(BM_B2_OnednnConv2DBackpropInput)->Apply(ConvPassArgs);
BENCHMARK(BM_B2_ForwardBackward)->Apply(Args);
BENCHMARK(BM_Conv2D)->Apply(ConvArgs);
BENCHMARK(BM_Conv2DPixelRows)->Apply(PixelRowArgs);
BENCHMARK(BM_Conv2DPixelRowsForced)->Apply(PixelRowForcedArgs);
BENCHMARK(BM_OnednnConv2D)->Apply(ConvArgs);
BENCHMARK(BM_Conv2DBackpropFilter)->Apply(ConvArgs);
BENCHMARK(BM_OnednnConv2DBackpropFilter)->Apply(ConvArgs);
BENCHMARK(BM_Conv2DBackpropInput)->Apply(ConvArgs);
BENCHMARK(BM_OnednnConv2DBackpropInput)->Apply(ConvArgs);

}  // namespace
}  // namespace ipuflow::ops
