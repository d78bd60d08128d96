// PopnnLSTM forward (the op as a one-node program) beside oneDNN's
// vanilla LSTM primitive (forward training, so it writes the workspace a
// backward pass would read, as the op writes its cache) on the same
// shapes, one thread, in one run; and PopnnLSTM with its gradient op.
//
//   ./bazelw run //ops/rnn:lstm_vs_onednn_benchmark --
//     --benchmark_min_time=0.5            # (one line)
//
// Shapes [time, batch, input] -> units: a speech-sized layer (100 frames,
// batch 16, 80 features, 256 units) and a small one (20, 32, 32 -> 64).
// Keras's gate order (i, f, c, o) is oneDNN's, so the kernel [I, 4u] is
// its ldigo weights as they are.
#include <array>
#include <vector>

#include "benchmark/benchmark.h"
#include "core/gradients.h"
#include "core/testing/op_test.h"
#include "ops/array/const.h"
#include "ops/onednn/onednn.h"
#include "ops/rnn/lstm.h"
#include "ops/testing/bench_program.h"

namespace ipuflow::ops {
namespace {

using dnnl::memory;

struct Case {
  int64_t t, b, i, u;
};
constexpr std::array<Case, 2> kCases = {{{100, 16, 80, 256}, {20, 32, 32, 64}}};

void OpCase(benchmark::State& state, bool grad) {
  const Case c = kCases[state.range(0)];
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, TensorShape({c.t, c.b, c.i}));
  Output k = Const(s, testing::RandomTensor({c.i, 4 * c.u}, -0.1, 0.1, 2));
  Output r = Const(s, testing::RandomTensor({c.u, 4 * c.u}, -0.1, 0.1, 3));
  Output bias = Const(s, testing::RandomTensor({4 * c.u}, -0.1, 0.1, 4));
  LstmOptions o;
  o.time_major = true;
  LstmOutputs l = PopnnLSTM(s, x, k, r, bias, o);
  std::vector<Output> fetches = {l.output};
  if (grad) {
    std::vector<Output> dx;
    const absl::Status st = AddGradients(s, {l.output}, {x, k, r}, {}, &dx);
    if (!st.ok()) {
      state.SkipWithError(st.ToString().c_str());
      return;
    }
    fetches = dx;
  }
  const Tensor xv = testing::RandomTensor({c.t, c.b, c.i}, -1, 1, 1);
  if (testing::RunProgramPerIteration(state, s, {x}, {xv}, fetches,
                                      /*intra_op_threads=*/0)) {
    state.SetItemsProcessed(state.iterations() * c.t * c.b);
  }
}

void OnednnCase(benchmark::State& state) {
  onednn::UseOneThread();
  const Case c = kCases[state.range(0)];
  const auto f32 = memory::data_type::f32;
  using Tag = memory::format_tag;
  const memory::desc src({c.t, c.b, c.i}, f32, Tag::tnc);
  const memory::desc dst({c.t, c.b, c.u}, f32, Tag::tnc);
  const memory::desc state_desc({1, 1, c.b, c.u}, f32, Tag::ldnc);
  const memory::desc wl({1, 1, c.i, 4, c.u}, f32, Tag::ldigo);
  const memory::desc wi({1, 1, c.u, 4, c.u}, f32, Tag::ldigo);
  const memory::desc bias({1, 1, 4, c.u}, f32, Tag::ldgo);
  const Tensor xv = testing::RandomTensor({c.t, c.b, c.i}, -1, 1, 1);
  const Tensor kv = testing::RandomTensor({c.i, 4 * c.u}, -0.1, 0.1, 2);
  const Tensor rv = testing::RandomTensor({c.u, 4 * c.u}, -0.1, 0.1, 3);
  const Tensor bv = testing::RandomTensor({4 * c.u}, -0.1, 0.1, 4);
  std::vector<float> y(c.t * c.b * c.u), h0(c.b * c.u), c0(c.b * c.u),
      h(c.b * c.u), cs(c.b * c.u);
  try {
    const dnnl::lstm_forward::primitive_desc pd(
        dnnl::lstm_forward::desc(dnnl::prop_kind::forward_training,
                                 dnnl::rnn_direction::unidirectional_left2right,
                                 src, state_desc, state_desc, wl, wi, bias, dst,
                                 state_desc, state_desc),
        onednn::ScratchpadAttr(), onednn::Engine());
    const dnnl::lstm_forward lstm(pd);
    std::vector<uint8_t> workspace(pd.workspace_desc().get_size() + 64);
    for (auto _ : state) {
      onednn::Execute(
          lstm, pd.scratchpad_desc(),
          {{DNNL_ARG_SRC_LAYER, onednn::Wrap(src, xv.data<float>())},
           {DNNL_ARG_SRC_ITER, onednn::Wrap(state_desc, h0.data())},
           {DNNL_ARG_SRC_ITER_C, onednn::Wrap(state_desc, c0.data())},
           {DNNL_ARG_WEIGHTS_LAYER, onednn::Wrap(wl, kv.data<float>())},
           {DNNL_ARG_WEIGHTS_ITER, onednn::Wrap(wi, rv.data<float>())},
           {DNNL_ARG_BIAS, onednn::Wrap(bias, bv.data<float>())},
           {DNNL_ARG_DST_LAYER, onednn::Wrap(dst, y.data())},
           {DNNL_ARG_DST_ITER, onednn::Wrap(state_desc, h.data())},
           {DNNL_ARG_DST_ITER_C, onednn::Wrap(state_desc, cs.data())},
           {DNNL_ARG_WORKSPACE,
            onednn::Wrap(pd.workspace_desc(), workspace.data())}});
      benchmark::DoNotOptimize(y.data());
    }
  } catch (const dnnl::error& e) {
    state.SkipWithError(e.what());
    return;
  }
  state.SetItemsProcessed(state.iterations() * c.t * c.b);
}

void Args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"case"})->DenseRange(0, kCases.size() - 1);
  b->Unit(benchmark::kMicrosecond)->UseRealTime();
}
void BM_PopnnLSTM(benchmark::State& s) { OpCase(s, false); }
void BM_OnednnLSTM(benchmark::State& s) { OnednnCase(s); }
void BM_PopnnLSTMWithGrad(benchmark::State& s) { OpCase(s, true); }
BENCHMARK(BM_PopnnLSTM)->Apply(Args);
BENCHMARK(BM_OnednnLSTM)->Apply(Args);
BENCHMARK(BM_PopnnLSTMWithGrad)->Apply(Args);

}  // namespace
}  // namespace ipuflow::ops
