// Data-parallel throughput of the one execution model: the same training
// step (an MLP 784-512-10 on batches of 32, SGD) in a device loop, on 1
// replica and on 2, measured side by side in one run (runs alternate,
// medians reported), so the ratio is meaningful on a shared, noisy machine.
// Both configurations use a 2-IPU system, so every IPU has one thread (no
// intra-op helpers) and R=1 leaves one IPU idle. Two optimizers:
// CrossReplicaOptimizer (an all-reduce of 1.6 MB of gradients every step)
// and CrossReplicaGradientAccumulationOptimizerV2 over 8 mini-batches (one
// per 8 steps: TensorFlow IPU guide 6.7, "reduces the number of times the
// gradients are exchanged between replicas").
//
//   bazel run -c opt //tests:replication_benchmark -- [--rounds=5]
//
// Prints the CPU model and ISA first (core/machine_info.h).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "core/ipu/ipu_strategy.h"
#include "core/machine_info.h"
#include "core/testing/op_test.h"
#include "feeds/dataset.h"
#include "feeds/infeed_queue.h"
#include "ops/array/const.h"
#include "ops/control/loops.h"
#include "ops/math/add.h"
#include "ops/math/mat_mul.h"
#include "ops/nn/relu.h"
#include "ops/nn/sparse_softmax_cross_entropy_with_logits.h"
#include "ops/state/variable.h"
#include "optimizers/cross_replica.h"
#include "optimizers/gradient_accumulation.h"
#include "optimizers/gradient_descent.h"

ABSL_FLAG(int, rounds, 5, "alternating rounds per configuration");
ABSL_FLAG(int, steps, 200, "training steps per replica per host call");

namespace ipuflow {
namespace {

constexpr int kBatch = 32, kIn = 784, kHidden = 512, kClasses = 10;
constexpr int kDistinctBatches = 64;

// One replicated training loop on its own system.
struct Setup {
  int replicas = 1;
  int accumulate = 1;  // Mini-batches per weight update.
  std::unique_ptr<IPUSystem> system;
  std::unique_ptr<feeds::IPUInfeedQueue> infeed;
  Scope scope = Scope::NewRootScope();
  std::unique_ptr<optimizers::Optimizer> sgd;
  std::unique_ptr<optimizers::Optimizer> opt;
  std::unique_ptr<IPUStrategy> strategy;
  Executable* exe = nullptr;
};

absl::StatusOr<std::unique_ptr<Setup>> Build(int replicas, int accumulate,
                                             int steps) {
  auto s = std::make_unique<Setup>();
  s->replicas = replicas;
  s->accumulate = accumulate;
  IPUConfig config;
  config.set_auto_select_ipus(2);
  config.set_replication_factor(replicas);
  ASSIGN_OR_RETURN(s->system, IPUSystem::Create(config));
  Tensor x = testing::RandomTensor({kDistinctBatches, kBatch, kIn}, 0, 1, 1);
  Tensor labels(DType::kInt32, {kDistinctBatches, kBatch});
  for (int i = 0; i < kDistinctBatches * kBatch; ++i) {
    labels.data<int32_t>()[i] = i % kClasses;
  }
  ASSIGN_OR_RETURN(
      s->infeed,
      feeds::IPUInfeedQueue::Create(feeds::FromTensorSlices({x, labels})->Repeat()));
  const Scope& root = s->scope;
  auto w1 = ops::Variable(root.WithOpName("w1"),
                          ops::Const(root, testing::RandomTensor({kIn, kHidden}, -0.05f, 0.05f, 2)));
  auto w2 = ops::Variable(root.WithOpName("w2"),
                          ops::Const(root, testing::RandomTensor({kHidden, kClasses}, -0.05f, 0.05f, 3)));
  s->sgd = std::make_unique<optimizers::GradientDescentOptimizer>(0.01f);
  if (accumulate == 1) {
    s->opt = std::make_unique<optimizers::CrossReplicaOptimizer>(s->sgd.get());
  } else {
    s->opt = std::make_unique<
        optimizers::CrossReplicaGradientAccumulationOptimizerV2>(
        s->sgd.get(), accumulate,
        optimizers::GradientAccumulationReductionMethod::kMean);
  }
  Setup* raw = s.get();
  ASSIGN_OR_RETURN(
      loops::Loop loop,
      loops::Repeat(
          root, steps,
          [&](const Scope& b, const std::vector<Output>& batch) {
            Output h = ops::Relu(b, ops::MatMul(b, batch[0], w1.value));
            Output logits = ops::MatMul(b, h, w2.value);
            raw->opt->Minimize(b, ops::SoftmaxCrossEntropyLoss(b, logits, batch[1]));
            return std::vector<Output>{};
          },
          {}, s->infeed.get()));
  RETURN_IF_ERROR(root.status());
  s->strategy = std::make_unique<IPUStrategy>(s->system.get());
  RETURN_IF_ERROR(s->strategy->Initialize(*root.graph()));
  ASSIGN_OR_RETURN(s->exe, s->strategy->Compile(*root.graph(), {}, {loop.op}));
  return s;
}

// Seconds for one host call (steps iterations on every replica).
absl::StatusOr<double> TimeOneCall(Setup& s) {
  std::vector<std::vector<Tensor>> results;
  const auto t0 = std::chrono::steady_clock::now();
  RETURN_IF_ERROR(s.exe->Execute({{}}, &results));
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
      .count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int Main() {
  const int rounds = absl::GetFlag(FLAGS_rounds);
  const int steps = absl::GetFlag(FLAGS_steps);
  std::printf("%s\n", MachineDescription().c_str());
  std::printf("MLP %d-%d-%d, batch %d, SGD, %d steps per call; each IPU "
              "one thread\n",
              kIn, kHidden, kClasses, kBatch, steps);
  std::vector<std::unique_ptr<Setup>> setups;
  for (int accumulate : {1, 8}) {
    for (int r : {1, 2}) {
      auto s = Build(r, accumulate, steps);
      if (!s.ok()) {
        std::fprintf(stderr, "%s\n", s.status().ToString().c_str());
        return 1;
      }
      setups.push_back(*std::move(s));
      if (!TimeOneCall(*setups.back()).ok()) return 1;  // Warm-up.
    }
  }
  std::vector<std::vector<double>> rate(setups.size());
  for (int round = 0; round < rounds; ++round) {
    for (size_t i = 0; i < setups.size(); ++i) {
      absl::StatusOr<double> t = TimeOneCall(*setups[i]);
      if (!t.ok()) {
        std::fprintf(stderr, "%s\n", t.status().ToString().c_str());
        return 1;
      }
      rate[i].push_back(setups[i]->replicas * steps * kBatch / *t);
    }
  }
  for (size_t i = 0; i < setups.size(); ++i) {
    const Setup& s = *setups[i];
    std::printf("%-48s %d replica(s): %6.0f samples/s (median of %d; min "
                "%.0f, max %.0f)\n",
                s.accumulate == 1
                    ? "CrossReplicaOptimizer (all-reduce every step)"
                    : "CrossReplicaGradientAccumulationOptimizerV2(8)",
                s.replicas, Median(rate[i]), rounds,
                *std::min_element(rate[i].begin(), rate[i].end()),
                *std::max_element(rate[i].begin(), rate[i].end()));
    if (s.replicas == 2) {
      std::printf("  2 replicas / 1 replica: %.2fx\n",
                  Median(rate[i]) / Median(rate[i - 1]));
    }
  }
  return 0;
}

}  // namespace
}  // namespace ipuflow

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return ipuflow::Main();
}
