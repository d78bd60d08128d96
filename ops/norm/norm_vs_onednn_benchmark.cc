// LayerNorm and BatchNorm (training forward) side by side with oneDNN's
// layer_normalization and batch_normalization primitives on the same
// shapes, one thread, in one run: the measurement behind keeping
// norm_kernels.h (float64 statistics, results independent of the thread
// count) rather than calling oneDNN (float32 statistics). BM_*WithGrad
// time the op and its gradient op together (oneDNN 2.6.3's backward
// normalisation primitives failed to execute here, "could not execute a
// primitive", so they have no oneDNN twin).
//
//   ./bazelw run //ops/norm:norm_vs_onednn_benchmark --
//     --benchmark_min_time=0.5 --benchmark_repetitions=3   # (one line)
//
// Shapes: LayerNorm over BERT-base's hidden size, [1024 tokens, 768]
// (batch 8 x sequence 128); BatchNorm NHWC over the tutorial ConvNet's first
// block, [40, 24, 24, 10], and a ResNet stage, [32, 28, 28, 64].
// BM_<Op> runs the op (and for *WithGrad its gradient op too) as a
// program (the executor's per-run cost included); BM_Onednn<Op> runs the
// primitive directly, created once (training forward with scale and
// shift, mean and variance out).
#include <vector>

#include "benchmark/benchmark.h"
#include "core/testing/op_test.h"
#include "ops/array/const.h"
#include "ops/norm/batch_norm.h"
#include "ops/norm/layer_norm.h"
#include "ops/onednn/onednn.h"
#include "ops/testing/bench_program.h"

namespace ipuflow::ops {
namespace {

using dnnl::memory;

struct NormCase {
  std::vector<int64_t> shape;  // Normalised over the last axis's channels.
};
const NormCase kLayer[] = {{{1024, 768}}};
const NormCase kBatch[] = {{{40, 24, 24, 10}}, {{32, 28, 28, 64}}};

int64_t Elements(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

void OpCase(benchmark::State& state, bool layer, bool grad) {
  const std::vector<int64_t>& shape =
      (layer ? kLayer : kBatch)[state.range(0)].shape;
  const int64_t c = shape.back();
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, TensorShape(shape));
  Output dy = Placeholder(s, DType::kFloat32, TensorShape(shape));
  Output gamma = Const(s, testing::RandomTensor({c}, 0.5, 1.5, 2));
  Output beta = Const(s, testing::RandomTensor({c}, -1, 1, 3));
  std::vector<Output> fetches;
  if (layer) {
    NormOutputs n = LayerNorm(s, x, gamma, beta);
    fetches = {n.y};
    if (grad) {
      NormGradOutputs g = LayerNormGrad(s, dy, x, gamma, n.mean, n.inv_std,
                                        /*begin_norm_axis=*/-1);
      fetches = {g.dx, g.dgamma, g.dbeta};
    }
  } else {
    BatchNormOutputs n = BatchNorm(s, x, gamma, beta);
    fetches = {n.y};
    if (grad) {
      Node* g = s.AddNode("BatchNormGrad", {dy, x, gamma, n.mean, n.inv_std},
                          {{"channels_axis", int64_t{-1}}});
      if (g != nullptr) fetches = {Output(g, 0), Output(g, 1), Output(g, 2)};
    }
  }
  const std::vector<Tensor> values = {
      testing::RandomTensor(TensorShape(shape), -2, 2, 1),
      testing::RandomTensor(TensorShape(shape), -1, 1, 4)};
  if (testing::RunProgramPerIteration(state, s, {x, dy}, values, fetches,
                                      /*intra_op_threads=*/0)) {
    state.SetItemsProcessed(state.iterations() * Elements(shape));
  }
}

// The same through oneDNN: forward training, mean and variance out.
void OnednnCase(benchmark::State& state, bool layer) {
  onednn::UseOneThread();
  const std::vector<int64_t>& shape =
      (layer ? kLayer : kBatch)[state.range(0)].shape;
  const int64_t c = shape.back(), rows = Elements(shape) / c;
  const auto f32 = memory::data_type::f32;
  const memory::desc data =
      layer ? memory::desc({rows, c}, f32, memory::format_tag::ab)
            : memory::desc({shape[0], c, shape[1], shape[2]}, f32,
                           memory::format_tag::nhwc);
  const memory::desc stat({layer ? rows : c}, f32, memory::format_tag::a);
  const memory::desc channel({c}, f32, memory::format_tag::a);
  const auto flags = dnnl::normalization_flags::use_scale |
                     dnnl::normalization_flags::use_shift;
  const auto training = dnnl::prop_kind::forward_training;
  const Tensor xv = testing::RandomTensor(TensorShape(shape), -2, 2, 1);
  const Tensor gamma = testing::RandomTensor({c}, 0.5, 1.5, 2);
  const Tensor beta = testing::RandomTensor({c}, -1, 1, 3);
  std::vector<float> y(Elements(shape)), mean(layer ? rows : c),
      var(layer ? rows : c);
  const dnnl::engine& e = onednn::Engine();
  dnnl::primitive fwd;
  memory::desc scratchpad;
  if (layer) {
    dnnl::layer_normalization_forward::primitive_desc pd(
        dnnl::layer_normalization_forward::desc(training, data, 1e-3f, flags),
        onednn::ScratchpadAttr(), e);
    fwd = dnnl::layer_normalization_forward(pd);
    scratchpad = pd.scratchpad_desc();
  } else {
    dnnl::batch_normalization_forward::primitive_desc pd(
        dnnl::batch_normalization_forward::desc(training, data, 1e-3f, flags),
        onednn::ScratchpadAttr(), e);
    fwd = dnnl::batch_normalization_forward(pd);
    scratchpad = pd.scratchpad_desc();
  }
  for (auto _ : state) {
    onednn::Execute(
        fwd, scratchpad,
        {{DNNL_ARG_SRC, onednn::Wrap(data, xv.data<float>())},
         {DNNL_ARG_DST, onednn::Wrap(data, y.data())},
         {DNNL_ARG_SCALE, onednn::Wrap(channel, gamma.data<float>())},
         {DNNL_ARG_SHIFT, onednn::Wrap(channel, beta.data<float>())},
         {DNNL_ARG_MEAN, onednn::Wrap(stat, mean.data())},
         {DNNL_ARG_VARIANCE, onednn::Wrap(stat, var.data())}});
    benchmark::DoNotOptimize(y.data());
  }
  state.SetItemsProcessed(state.iterations() * Elements(shape));
}

void BM_LayerNorm(benchmark::State& s) { OpCase(s, true, false); }
void BM_OnednnLayerNorm(benchmark::State& s) { OnednnCase(s, true); }
void BM_LayerNormWithGrad(benchmark::State& s) { OpCase(s, true, true); }
void BM_BatchNorm(benchmark::State& s) { OpCase(s, false, false); }
void BM_OnednnBatchNorm(benchmark::State& s) { OnednnCase(s, false); }
void BM_BatchNormWithGrad(benchmark::State& s) { OpCase(s, false, true); }

void LayerArgs(benchmark::internal::Benchmark* b) {
  b->ArgNames({"case"})->Arg(0)->Unit(benchmark::kMicrosecond)->UseRealTime();
}
void BatchArgs(benchmark::internal::Benchmark* b) {
  b->ArgNames({"case"})->DenseRange(0, 1)->Unit(benchmark::kMicrosecond);
  b->UseRealTime();
}
BENCHMARK(BM_LayerNorm)->Apply(LayerArgs);
BENCHMARK(BM_OnednnLayerNorm)->Apply(LayerArgs);
BENCHMARK(BM_LayerNormWithGrad)->Apply(LayerArgs);
BENCHMARK(BM_BatchNorm)->Apply(BatchArgs);
BENCHMARK(BM_OnednnBatchNorm)->Apply(BatchArgs);
BENCHMARK(BM_BatchNormWithGrad)->Apply(BatchArgs);

}  // namespace
}  // namespace ipuflow::ops
