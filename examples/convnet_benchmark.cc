// The tutorial ConvNet (models::ConvNet) at batch 40 on random images and
// labels through a host Session: forward only (the mean softmax
// cross-entropy loss), forward + backward (the loss and its gradients with
// respect to every trainable variable read, no update) and a whole AdamW
// training step.
//
//   ./bazelw run //examples:convnet_benchmark -- --benchmark_min_time=1
//
// Counters: images/s, and flops/s counted from models::ConvNetForwardFlops()
// (the convolutions and dense layers' multiply-adds; pooling, bias, ReLU,
// loss and the optimizer are not counted). A backward pass costs twice the
// forward one (one product for the input gradient, one for the weight
// gradient per layer), so forward + backward counts 3x the forward flops.
//
// The comparison with the oneDNN-only program (issue 12's reference) is
// //examples:onednn_reference_benchmark alone: it alternates the two in one
// process with libgomp's workers passive. The oneDNN cases this file had
// timed ipuflow 1.6x slower there than here (spinning OpenMP workers left
// over from the previous case took a core), so the same step had two
// numbers. Each case runs fused (fuse:1) or unfused (fuse:0).
#include <algorithm>
#include <random>
#include <set>
#include <vector>

#include "benchmark/benchmark.h"
#include "core/gradients.h"
#include "core/session.h"
#include "examples/models.h"
#include "ops/array/const.h"
#include "ops/nn/sparse_softmax_cross_entropy_with_logits.h"
#include "optimizers/adamw.h"

namespace ipuflow {
namespace {

constexpr int64_t kBatch = 40;

enum class Pass { kForward, kForwardBackward, kAdamWStep };

// The ConvNet's graph for one pass: what to feed, fetch and run.
struct ConvNetGraph {
  Scope scope = Scope::NewRootScope();
  Output images, labels, loss;
  std::vector<Output> fetches;  // loss, then any gradients.
  std::vector<Node*> targets;   // The AdamW step, if any.
};

// The reads of trainable variables that `loss` depends on (the variables'
// own unused "<name>/Read" nodes are left out).
std::vector<Output> TrainableReads(const Graph& graph, Output loss) {
  const std::vector<Node*>& vars = graph.collection("trainable_variables");
  std::vector<Output> reads;
  std::vector<Node*> stack = {loss.node};
  std::set<Node*> seen = {loss.node};
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    if (n->op() == "ReadVariable" &&
        std::find(vars.begin(), vars.end(), n->input(0).node) != vars.end()) {
      reads.push_back(Output(n, 0));
    }
    for (const Output& in : n->inputs()) {
      if (seen.insert(in.node).second) stack.push_back(in.node);
    }
  }
  return reads;
}

absl::Status BuildConvNet(Pass pass, ConvNetGraph* g) {
  const Scope& s = g->scope;
  g->images = ops::Placeholder(s, DType::kFloat32, {kBatch, 28, 28, 1});
  g->labels = ops::Placeholder(s, DType::kInt32, {kBatch});
  const models::ConvNetParams params = models::CreateConvNetParams(s);
  g->loss = ops::SoftmaxCrossEntropyLoss(
      s, models::ConvNet(s, params, g->images), g->labels);
  g->fetches = {g->loss};
  if (pass == Pass::kForwardBackward) {
    std::vector<Output> grads;
    RETURN_IF_ERROR(AddGradients(
        s, {g->loss}, TrainableReads(*s.graph(), g->loss), {}, &grads));
    g->fetches.insert(g->fetches.end(), grads.begin(), grads.end());
  } else if (pass == Pass::kAdamWStep) {
    optimizers::AdamWOptimizer adamw(/*learning_rate=*/1e-3f);
    g->targets = {adamw.Minimize(s, g->loss)};
  }
  return s.status();
}

// Images uniform in [0, 1), labels uniform in [0, 10).
FeedList RandomBatch(const ConvNetGraph& g) {
  std::mt19937 gen(42);
  Tensor images(DType::kFloat32, {kBatch, 28, 28, 1});
  std::uniform_real_distribution<float> pixel(0.0f, 1.0f);
  for (float& p : images.span<float>()) p = pixel(gen);
  Tensor labels(DType::kInt32, {kBatch});
  std::uniform_int_distribution<int32_t> label(0, 9);
  for (int32_t& l : labels.span<int32_t>()) l = label(gen);
  return {{g.images, images}, {g.labels, labels}};
}

void RunConvNet(benchmark::State& state, Pass pass) {
  ConvNetGraph g;
  absl::Status status = BuildConvNet(pass, &g);
  SessionOptions options;
  options.intra_op_threads = static_cast<int>(state.range(0));
  options.fuse = state.range(1) != 0;
  Session session(g.scope.graph(), options);
  if (status.ok()) status = session.Initialize();
  if (!status.ok()) {
    state.SkipWithError(status.ToString().c_str());
    return;
  }
  const FeedList feeds = RandomBatch(g);
  std::vector<Tensor> out;
  for (auto _ : state) {
    status = session.Run(feeds, g.fetches, g.targets, &out);
    if (!status.ok()) {
      state.SkipWithError(status.ToString().c_str());
      return;
    }
    benchmark::DoNotOptimize(out[0].data<float>());
  }
  const double images = static_cast<double>(state.iterations()) * kBatch;
  const double passes = pass == Pass::kForward ? 1 : 3;
  state.counters["images"] =
      benchmark::Counter(images, benchmark::Counter::kIsRate);
  state.counters["flops"] =
      benchmark::Counter(images * passes * models::ConvNetForwardFlops(),
                         benchmark::Counter::kIsRate);
}

// fuse:1 compiles with fusion (core/compiler/fusion.h), fuse:0 without.
// intra_op_threads:0 is the Session's default pool (cores - 1 workers, the
// caller meant to take part); :2 asks for two workers. They differ because
// Eigen's parallelFor (under ThreadPool::ParallelFor) runs every shard on the
// pool's workers, none on the caller, once there are more shards than the
// device's thread count: with one worker, large ops then use one core.
void ThreadArgs(benchmark::internal::Benchmark* b) {
  b->ArgNames({"intra_op_threads", "fuse"})
      ->Args({0, 1})
      ->Args({0, 0})
      ->Args({2, 1});
  b->Unit(benchmark::kMillisecond)->UseRealTime();
}

void BM_ConvNetForward(benchmark::State& state) {
  RunConvNet(state, Pass::kForward);
}
BENCHMARK(BM_ConvNetForward)->Apply(ThreadArgs);

void BM_ConvNetForwardBackward(benchmark::State& state) {
  RunConvNet(state, Pass::kForwardBackward);
}
BENCHMARK(BM_ConvNetForwardBackward)->Apply(ThreadArgs);

void BM_ConvNetAdamWStep(benchmark::State& state) {
  RunConvNet(state, Pass::kAdamWStep);
}
BENCHMARK(BM_ConvNetAdamWStep)->Apply(ThreadArgs);

}  // namespace
}  // namespace ipuflow
