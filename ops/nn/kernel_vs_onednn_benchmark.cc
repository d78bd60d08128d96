// ipuflow's element-wise and pooling kernels side by side with oneDNN's
// primitives on the tutorial ConvNet's shapes at batch 40 (models::ConvNet:
// conv 24x24x10 -> MaxPool 2 -> ReLU, conv 8x8x20 -> MaxPool 2 -> ReLU),
// one thread, in one run (issue 12: ReluGrad and max-pool within 1.2x of
// oneDNN).
//
//   ./bazelw run //ops/nn:kernel_vs_onednn_benchmark --
//   --benchmark_min_time=0.5
//
// BM_<Op>/<shape> runs the op as a one-node program (testing::
// RunProgramPerIteration: the executor's per-run cost and the copy of the
// result out of the arena included, as a step pays them);
// BM_Onednn<Op>/<shape> runs the equivalent primitive directly (created
// once, cached as ops/onednn does, one OpenMP thread):
//   ReluGrad     eltwise_backward, eltwise_relu_use_dst_for_bwd (dx from
//                dy and y = relu(x), ReluGrad's inputs)
//   MaxPool2D    pooling_forward max, forward_inference (no workspace;
//                BM_OnednnMaxPoolTraining writes the argmax workspace the
//                backward primitive needs, as a training step would)
//   MaxPoolGrad  pooling_backward max from that workspace
// BM_Select/<shape> times Select (float32, same shapes) on the pooled size.
// BM_Identity/<shape> is the program overhead for an output of that size
// (an Identity node fetched: the executor and the copy out).
// BM_Kernel<Loop>/shape/avx512:{0,1} runs one loop of ops/math/
// vector_kernels.h alone, its AVX2 (0) and AVX-512 (1) variants on the same
// data: the measurement behind UsedVectorKernels()' choice. Alternate them:
//   ./bazelw run //ops/nn:kernel_vs_onednn_benchmark --
//     --benchmark_filter=BM_Kernel --benchmark_repetitions=5
//     --benchmark_enable_random_interleaving=true   # (one line)
// The machine line ends with the ISA ipuflow's kernels use (core/cpu_isa.h;
// IPUFLOW_MAX_ISA=avx2 caps them and oneDNN).
#include <malloc.h>

#include <random>
#include <vector>

#include "benchmark/benchmark.h"
#include "core/machine_info.h"
#include "core/program.h"
#include "ops/array/const.h"
#include "ops/array/identity.h"
#include "ops/math/select.h"
#include "ops/math/vector_kernels.h"
#include "ops/nn/max_pool_2d.h"
#include "ops/nn/relu.h"
#include "ops/onednn/onednn.h"
#include "ops/testing/bench_program.h"

namespace ipuflow::ops {
namespace {

using dnnl::memory;

// The ConvNet's pooled layers: [40, h, w, c] before the pool.
struct Shape {
  int64_t n, h, w, c;
};
constexpr Shape kShapes[] = {{40, 24, 24, 10}, {40, 8, 8, 20}};

Shape ShapeArg(const benchmark::State& s) { return kShapes[s.range(0)]; }
TensorShape Pre(const Shape& s) { return {s.n, s.h, s.w, s.c}; }
TensorShape Pooled(const Shape& s) { return {s.n, s.h / 2, s.w / 2, s.c}; }

Tensor Uniform(const TensorShape& shape, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  Tensor t(DType::kFloat32, shape);
  for (float& v : t.span<float>()) v = dist(gen);
  return t;
}

void Items(benchmark::State& state, int64_t items) {
  state.counters["items"] =
      benchmark::Counter(static_cast<double>(items) * state.iterations(),
                         benchmark::Counter::kIsRate);
}

// One program of `make(inputs)` over placeholders fed with `values`.
template <typename Make>
void RunOp(benchmark::State& state, const std::vector<Tensor>& values,
           Make make, int64_t items) {
  Scope scope = Scope::NewRootScope();
  std::vector<Output> feeds;
  for (const Tensor& v : values) {
    feeds.push_back(Placeholder(scope, DType::kFloat32, v.shape()));
  }
  const Output out = make(scope, feeds);
  if (!testing::RunProgramPerIteration(state, scope, feeds, values, {out},
                                       /*intra_op_threads=*/0)) {
    return;
  }
  Items(state, items);
}

memory::desc Nhwc(const TensorShape& s) {
  return memory::desc({s.dim(0), s.dim(3), s.dim(1), s.dim(2)},
                      memory::data_type::f32, memory::format_tag::nhwc);
}

// ---- ReluGrad (on the pooled activations, where the ConvNet applies it).

void BM_ReluGrad(benchmark::State& state) {
  const TensorShape s = Pooled(ShapeArg(state));
  RunOp(
      state, {Uniform(s, 1), Uniform(s, 2)},
      [](Scope& sc, const std::vector<Output>& in) {
        return ReluGrad(sc, in[0], Relu(sc, in[1]));
      },
      s.num_elements());
}

// Relu's output fed, so the op timed is ReluGrad alone.
void BM_ReluGradOnly(benchmark::State& state) {
  const TensorShape s = Pooled(ShapeArg(state));
  Tensor y = Uniform(s, 2);
  for (float& v : y.span<float>()) v = std::max(v, 0.0f);
  RunOp(
      state, {Uniform(s, 1), y},
      [](Scope& sc, const std::vector<Output>& in) {
        return ReluGrad(sc, in[0], in[1]);
      },
      s.num_elements());
}

void BM_OnednnReluGrad(benchmark::State& state) {
  const TensorShape s = Pooled(ShapeArg(state));
  onednn::UseOneThread();
  const memory::desc d = Nhwc(s);
  const dnnl::engine& e = onednn::Engine();
  const dnnl::eltwise_forward::primitive_desc fwd(
      {dnnl::prop_kind::forward_training,
       dnnl::algorithm::eltwise_relu_use_dst_for_bwd, d, 0.0f},
      e);
  const dnnl::eltwise_backward::primitive_desc pd(
      {dnnl::algorithm::eltwise_relu_use_dst_for_bwd, d, d, 0.0f}, e, fwd);
  const dnnl::eltwise_backward prim(pd);
  Tensor dy = Uniform(s, 1), y = Uniform(s, 2), dx(DType::kFloat32, s);
  for (float& v : y.span<float>()) v = std::max(v, 0.0f);
  for (auto _ : state) {
    onednn::Execute(prim, memory::desc(),
                    {{DNNL_ARG_DIFF_DST, onednn::Wrap(d, dy.data<float>())},
                     {DNNL_ARG_DST, onednn::Wrap(d, y.data<float>())},
                     {DNNL_ARG_DIFF_SRC, onednn::Wrap(d, dx.data<float>())}});
    benchmark::DoNotOptimize(dx.data<float>());
  }
  Items(state, s.num_elements());
}

// ---- MaxPool2D 2x2 stride 2 VALID, forward and backward.

void BM_MaxPool2D(benchmark::State& state) {
  const TensorShape s = Pre(ShapeArg(state));
  RunOp(
      state, {Uniform(s, 3)},
      [](Scope& sc, const std::vector<Output>& in) {
        return MaxPool2D(sc, in[0], {2, 2}, {2, 2}, "VALID");
      },
      s.num_elements());
}

void BM_MaxPoolGrad(benchmark::State& state) {
  const TensorShape s = Pre(ShapeArg(state));
  // y = MaxPool2D(x) computed here, so the program times MaxPoolGrad alone.
  const Tensor x = Uniform(s, 3);
  Tensor y(DType::kFloat32, Pooled(ShapeArg(state)));
  {
    const Shape sh = ShapeArg(state);
    const float* px = x.data<float>();
    float* py = y.data<float>();
    const int64_t oh = sh.h / 2, ow = sh.w / 2, c = sh.c;
    for (int64_t n = 0; n < sh.n; ++n)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j)
          for (int64_t k = 0; k < c; ++k) {
            auto at = [&](int64_t a, int64_t b) {
              return px[((n * sh.h + a) * sh.w + b) * c + k];
            };
            py[((n * oh + i) * ow + j) * c + k] = std::max(
                std::max(at(2 * i, 2 * j), at(2 * i, 2 * j + 1)),
                std::max(at(2 * i + 1, 2 * j), at(2 * i + 1, 2 * j + 1)));
          }
  }
  RunOp(
      state, {x, y, Uniform(y.shape(), 4)},
      [](Scope& sc, const std::vector<Output>& in) {
        return MaxPoolGrad(sc, in[0], in[1], in[2], {2, 2}, {2, 2}, "VALID");
      },
      s.num_elements());
}

struct OnednnPool {
  memory::desc src, dst;
  dnnl::pooling_forward::primitive_desc fwd_pd;
  dnnl::pooling_forward fwd;
};

OnednnPool MakePool(const Shape& sh, dnnl::prop_kind kind) {
  const memory::desc src = Nhwc(Pre(sh)), dst = Nhwc(Pooled(sh));
  const dnnl::pooling_forward::primitive_desc pd({kind,
                                                  dnnl::algorithm::pooling_max,
                                                  src,
                                                  dst,
                                                  {2, 2},
                                                  {2, 2},
                                                  {0, 0},
                                                  {0, 0}},
                                                 onednn::Engine());
  return {src, dst, pd, dnnl::pooling_forward(pd)};
}

void OnednnPoolForward(benchmark::State& state, dnnl::prop_kind kind) {
  const Shape sh = ShapeArg(state);
  onednn::UseOneThread();
  const OnednnPool p = MakePool(sh, kind);
  Tensor x = Uniform(Pre(sh), 3), y(DType::kFloat32, Pooled(sh));
  std::vector<uint8_t> ws(p.fwd_pd.workspace_desc().get_size() + 64);
  for (auto _ : state) {
    std::unordered_map<int, memory> args = {
        {DNNL_ARG_SRC, onednn::Wrap(p.src, x.data<float>())},
        {DNNL_ARG_DST, onednn::Wrap(p.dst, y.data<float>())}};
    if (kind == dnnl::prop_kind::forward_training) {
      args.emplace(DNNL_ARG_WORKSPACE,
                   onednn::Wrap(p.fwd_pd.workspace_desc(), ws.data()));
    }
    onednn::Execute(p.fwd, memory::desc(), std::move(args));
    benchmark::DoNotOptimize(y.data<float>());
  }
  Items(state, Pre(sh).num_elements());
}

void BM_OnednnMaxPool(benchmark::State& state) {
  OnednnPoolForward(state, dnnl::prop_kind::forward_inference);
}
void BM_OnednnMaxPoolTraining(benchmark::State& state) {
  OnednnPoolForward(state, dnnl::prop_kind::forward_training);
}

void BM_OnednnMaxPoolGrad(benchmark::State& state) {
  const Shape sh = ShapeArg(state);
  onednn::UseOneThread();
  const OnednnPool p = MakePool(sh, dnnl::prop_kind::forward_training);
  const dnnl::pooling_backward::primitive_desc pd({dnnl::algorithm::pooling_max,
                                                   p.src,
                                                   p.dst,
                                                   {2, 2},
                                                   {2, 2},
                                                   {0, 0},
                                                   {0, 0}},
                                                  onednn::Engine(), p.fwd_pd);
  const dnnl::pooling_backward bwd(pd);
  Tensor x = Uniform(Pre(sh), 3), y(DType::kFloat32, Pooled(sh));
  Tensor dy = Uniform(Pooled(sh), 4), dx(DType::kFloat32, Pre(sh));
  const memory::desc wsd = p.fwd_pd.workspace_desc();
  std::vector<uint8_t> ws(wsd.get_size() + 64);
  onednn::Execute(p.fwd, memory::desc(),
                  {{DNNL_ARG_SRC, onednn::Wrap(p.src, x.data<float>())},
                   {DNNL_ARG_DST, onednn::Wrap(p.dst, y.data<float>())},
                   {DNNL_ARG_WORKSPACE, onednn::Wrap(wsd, ws.data())}});
  for (auto _ : state) {
    onednn::Execute(
        bwd, memory::desc(),
        {{DNNL_ARG_DIFF_DST, onednn::Wrap(p.dst, dy.data<float>())},
         {DNNL_ARG_WORKSPACE, onednn::Wrap(wsd, ws.data())},
         {DNNL_ARG_DIFF_SRC, onednn::Wrap(p.src, dx.data<float>())}});
    benchmark::DoNotOptimize(dx.data<float>());
  }
  Items(state, Pre(sh).num_elements());
}

// ---- Select (no oneDNN counterpart; against ReluGrad's rate).

void BM_Select(benchmark::State& state) {
  const TensorShape s = Pooled(ShapeArg(state));
  Tensor cond(DType::kBool, s);
  std::mt19937 gen(6);
  for (bool& b : cond.span<bool>()) b = gen() & 1;
  Scope scope = Scope::NewRootScope();
  const Output c = Placeholder(scope, DType::kBool, s);
  const Output x = Placeholder(scope, DType::kFloat32, s);
  const Output y = Placeholder(scope, DType::kFloat32, s);
  if (!testing::RunProgramPerIteration(
          state, scope, {c, x, y}, {cond, Uniform(s, 1), Uniform(s, 2)},
          {Select(scope, c, x, y)}, /*intra_op_threads=*/0)) {
    return;
  }
  Items(state, s.num_elements());
}

// ---- The executor's own cost for an output of the pooled / pre-pool size.

void BM_Identity(benchmark::State& state) {
  const TensorShape s = Pooled(ShapeArg(state));
  RunOp(
      state, {Uniform(s, 1)},
      [](Scope& sc, const std::vector<Output>& in) {
        return Identity(sc, in[0]);
      },
      s.num_elements());
}

// ---- The dispatched loops alone, per ISA variant (vector_kernels.h), at
// the sizes the ConvNet runs them: Relu, ReluGrad and Select on the pooled
// activations, the bias add (+ReLU) and BiasAddGrad's sums on the
// convolutions' outputs, in the ops' blocks of whole rows.

// The variant of state.range(1) (0: AVX2, 1: AVX-512), or nullptr after
// skipping on a CPU without it.
const VectorKernels* Variant(benchmark::State& state) {
  const CpuIsa isa = state.range(1) ? CpuIsa::kAvx512 : CpuIsa::kAvx2;
  if (DetectedIsa() < isa) {
    state.SkipWithError("this CPU has no AVX-512");
    return nullptr;
  }
  return &VectorKernelsFor(isa);
}

void BM_KernelRelu(benchmark::State& state) {
  const VectorKernels* k = Variant(state);
  if (k == nullptr) return;
  const TensorShape s = Pooled(ShapeArg(state));
  const Tensor x = Uniform(s, 1);
  Tensor y(DType::kFloat32, s);
  for (auto _ : state) {
    k->relu(x.data<float>(), y.data<float>(), s.num_elements());
    benchmark::DoNotOptimize(y.data<float>());
  }
  Items(state, s.num_elements());
}

void BM_KernelReluGrad(benchmark::State& state) {
  const VectorKernels* k = Variant(state);
  if (k == nullptr) return;
  const TensorShape s = Pooled(ShapeArg(state));
  const Tensor dy = Uniform(s, 1), y = Uniform(s, 2);
  Tensor dx(DType::kFloat32, s);
  for (auto _ : state) {
    k->relu_grad(dy.data<float>(), y.data<float>(), dx.data<float>(),
                 s.num_elements());
    benchmark::DoNotOptimize(dx.data<float>());
  }
  Items(state, s.num_elements());
}

void BM_KernelSelect(benchmark::State& state) {
  const VectorKernels* k = Variant(state);
  if (k == nullptr) return;
  const TensorShape s = Pooled(ShapeArg(state));
  Tensor cond(DType::kBool, s), z(DType::kFloat32, s);
  std::mt19937 gen(6);
  for (bool& b : cond.span<bool>()) b = gen() & 1;
  const Tensor x = Uniform(s, 1), y = Uniform(s, 2);
  for (auto _ : state) {
    k->select4(cond.data<bool>(), x.data<float>(), y.data<float>(),
               z.data<float>(), s.num_elements());
    benchmark::DoNotOptimize(z.data<float>());
  }
  Items(state, s.num_elements());
}

// Rows per block as ops/nn/bias_add.cc and fused_bias_activation.cc tile
// the bias.
int64_t BiasBlock(int64_t c) { return std::max<int64_t>(1, 256 / c) * c; }

void BM_KernelBiasRelu(benchmark::State& state) {
  const VectorKernels* k = Variant(state);
  if (k == nullptr) return;
  const Shape sh = ShapeArg(state);
  const TensorShape s = Pre(sh);
  const int64_t block = BiasBlock(sh.c), n = s.num_elements();
  std::vector<float> tiled(block);
  for (int64_t i = 0; i < block; ++i) tiled[i] = 0.01f * (i % sh.c) - 0.05f;
  const Tensor x = Uniform(s, 1);
  Tensor y(DType::kFloat32, s);
  for (auto _ : state) {
    for (int64_t i = 0; i < n; i += block) {
      k->add_bias(x.data<float>() + i, tiled.data(), y.data<float>() + i,
                  std::min(block, n - i), /*relu=*/true);
    }
    benchmark::DoNotOptimize(y.data<float>());
  }
  Items(state, n);
}

void BM_KernelBiasGradSums(benchmark::State& state) {
  const VectorKernels* k = Variant(state);
  if (k == nullptr) return;
  const Shape sh = ShapeArg(state);
  const TensorShape s = Pre(sh);
  const int64_t block = BiasBlock(sh.c), n = s.num_elements();
  std::vector<float> acc(block);
  const Tensor dy = Uniform(s, 1);
  for (auto _ : state) {
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (int64_t i = 0; i < n; i += block) {
      k->accumulate(dy.data<float>() + i, acc.data(), std::min(block, n - i));
    }
    benchmark::DoNotOptimize(acc.data());
  }
  Items(state, n);
}

void KernelArgs(benchmark::internal::Benchmark* b) {
  b->ArgNames({"shape", "avx512"})->ArgsProduct({{0, 1}, {0, 1}});
  b->Unit(benchmark::kMicrosecond)->UseRealTime();
}

BENCHMARK(BM_KernelRelu)->Apply(KernelArgs);
BENCHMARK(BM_KernelReluGrad)->Apply(KernelArgs);
BENCHMARK(BM_KernelSelect)->Apply(KernelArgs);
BENCHMARK(BM_KernelBiasRelu)->Apply(KernelArgs);
BENCHMARK(BM_KernelBiasGradSums)->Apply(KernelArgs);

void ShapeArgs(benchmark::internal::Benchmark* b) {
  b->ArgName("shape")->Arg(0)->Arg(1);
  b->Unit(benchmark::kMicrosecond)->UseRealTime();
}

BENCHMARK(BM_ReluGrad)->Apply(ShapeArgs);
BENCHMARK(BM_ReluGradOnly)->Apply(ShapeArgs);
BENCHMARK(BM_OnednnReluGrad)->Apply(ShapeArgs);
BENCHMARK(BM_MaxPool2D)->Apply(ShapeArgs);
BENCHMARK(BM_OnednnMaxPool)->Apply(ShapeArgs);
BENCHMARK(BM_OnednnMaxPoolTraining)->Apply(ShapeArgs);
BENCHMARK(BM_MaxPoolGrad)->Apply(ShapeArgs);
BENCHMARK(BM_OnednnMaxPoolGrad)->Apply(ShapeArgs);
BENCHMARK(BM_Select)->Apply(ShapeArgs);
BENCHMARK(BM_Identity)->Apply(ShapeArgs);

const bool kContext = [] {
  // The program copies each fetched result into a new tensor per run; with
  // glibc's default mmap threshold (128 KiB, raised only after a free) a
  // 900 KiB result is sometimes mmapped, page-faulted and unmapped every
  // run, which made MaxPoolGrad bimodal (42 or 270 us). Heap it instead:
  // the kernels are what is compared here.
  mallopt(M_MMAP_THRESHOLD, 256 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
  benchmark::AddCustomContext("machine", MachineDescription());
  benchmark::AddCustomContext("onednn", onednn::Description());
  benchmark::AddCustomContext(
      "shapes",
      "shape:0 = [40,24,24,10] (pooled [40,12,12,10]), shape:1 = "
      "[40,8,8,20] (pooled [40,4,4,20])");
  return true;
}();

}  // namespace
}  // namespace ipuflow::ops
