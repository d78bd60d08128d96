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
// Prints the CPU model and ISA first (core/machine_info.h). With
// --threads, also where each configuration's threads spent the timed calls
// (Linux schedstat: running, runnable but waiting for a core, asleep), to
// see where the second replica loses time.
#include <dirent.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <string>
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
ABSL_FLAG(bool, profile, false,
          "print the loop body's kernel times per step on replica 0, for "
          "each configuration (Program::set_profiling)");
ABSL_FLAG(std::string, configs, "cr1,cr2,ga1,ga2",
          "which configurations to run: cr = CrossReplicaOptimizer, ga = "
          "CrossReplicaGradientAccumulationOptimizerV2(8), then the replica "
          "count (ratios are printed when both counts of one optimizer run; "
          "one configuration alone is for perf record)");
ABSL_FLAG(int, profile_top, 8, "kernels listed per body with --profile");
ABSL_FLAG(bool, threads, false,
          "print each configuration's busiest threads: running, waiting for "
          "a core, asleep (from /proc/self/task/*/schedstat)");

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
  Program* body = nullptr;  // Replica 0's loop body.
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
  ASSIGN_OR_RETURN(s->infeed,
                   feeds::IPUInfeedQueue::Create(
                       feeds::FromTensorSlices({x, labels})->Repeat()));
  const Scope& root = s->scope;
  auto w1 = ops::Variable(
      root.WithOpName("w1"),
      ops::Const(root,
                 testing::RandomTensor({kIn, kHidden}, -0.05f, 0.05f, 2)));
  auto w2 = ops::Variable(
      root.WithOpName("w2"),
      ops::Const(root,
                 testing::RandomTensor({kHidden, kClasses}, -0.05f, 0.05f, 3)));
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
            raw->opt->Minimize(
                b, ops::SoftmaxCrossEntropyLoss(b, logits, batch[1]));
            return std::vector<Output>{};
          },
          {}, s->infeed.get()));
  RETURN_IF_ERROR(root.status());
  s->strategy = std::make_unique<IPUStrategy>(s->system.get());
  RETURN_IF_ERROR(s->strategy->Initialize(*root.graph()));
  ASSIGN_OR_RETURN(DeviceProgram * dp,
                   s->strategy->Compile(*root.graph(), {}, {loop.op}));
  s->exe = dp;
  s->body = const_cast<Program&>(dp->program(0)).sub_program(loop.op, "body");
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

// Per thread of this process: nanoseconds on a core, nanoseconds runnable
// but waiting for one (schedstat), and voluntary context switches (sleeps).
struct ThreadTimes {
  int64_t run_ns = 0, wait_ns = 0, sleeps = 0;
};
using ProcessTimes = std::map<int, ThreadTimes>;

ProcessTimes ReadThreadTimes() {
  ProcessTimes times;
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return times;
  while (dirent* e = readdir(dir)) {
    const int tid = std::atoi(e->d_name);
    if (tid <= 0) continue;
    const std::string base = std::string("/proc/self/task/") + e->d_name;
    ThreadTimes t;
    std::ifstream(base + "/schedstat") >> t.run_ns >> t.wait_ns;
    std::ifstream status(base + "/status");
    for (std::string line; std::getline(status, line);) {
      if (line.rfind("voluntary_ctxt_switches:", 0) == 0) {
        t.sleeps = std::atoll(line.c_str() + 24);
      }
    }
    times[tid] = t;
  }
  closedir(dir);
  return times;
}

// Adds after - before to `sum`, by thread.
void AddDelta(const ProcessTimes& before, const ProcessTimes& after,
              ProcessTimes* sum) {
  for (const auto& [tid, a] : after) {
    auto it = before.find(tid);
    const ThreadTimes b = it == before.end() ? ThreadTimes() : it->second;
    ThreadTimes& s = (*sum)[tid];
    s.run_ns += a.run_ns - b.run_ns;
    s.wait_ns += a.wait_ns - b.wait_ns;
    s.sleeps += a.sleeps - b.sleeps;
  }
}

// The busiest threads, as shares of the wall time: running / waiting for a
// core / the rest (asleep or blocked), and sleeps per training step.
void PrintThreadTimes(const ProcessTimes& sum, double wall_s, int64_t steps) {
  std::vector<std::pair<int, ThreadTimes>> v(sum.begin(), sum.end());
  std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) {
    return a.second.run_ns > b.second.run_ns;
  });
  const double wall_ns = wall_s * 1e9;
  for (size_t i = 0; i < v.size() && i < 4; ++i) {
    const ThreadTimes& t = v[i].second;
    if (t.run_ns < 0.01 * wall_ns) break;
    std::printf(
        "    thread %d: %6.1f us CPU/step; running %5.1f%%, waiting "
        "for a core %5.1f%%, asleep %5.1f%%, %.2f sleeps/step\n",
        static_cast<int>(i), 1e-3 * t.run_ns / steps, 100 * t.run_ns / wall_ns,
        100 * t.wait_ns / wall_ns,
        100 * std::max(0.0, 1 - (t.run_ns + t.wait_ns) / wall_ns),
        static_cast<double>(t.sleeps) / steps);
  }
}

// The `top` kernels of a profiled body by time, in microseconds per run.
void PrintProfile(const Program& body, int top) {
  std::vector<Program::NodeTime> times = body.profile();
  std::sort(times.begin(), times.end(),
            [](const auto& a, const auto& b) { return a.seconds > b.seconds; });
  double total = 0;
  for (const auto& t : times) total += t.seconds;
  const int64_t runs = times.empty() ? 0 : times[0].runs;
  if (runs == 0) return;
  std::printf("    body on replica 0: %.1f us per step in kernels\n",
              1e6 * total / runs);
  for (int i = 0; i < top && i < static_cast<int>(times.size()); ++i) {
    std::printf("      %7.1f us  %s (%s)\n", 1e6 * times[i].seconds / runs,
                times[i].op.c_str(), times[i].name.c_str());
  }
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int Main() {
  const int rounds = absl::GetFlag(FLAGS_rounds);
  const int steps = absl::GetFlag(FLAGS_steps);
  std::printf("%s\n", MachineDescription().c_str());
  std::printf(
      "MLP %d-%d-%d, batch %d, SGD, %d steps per call; each IPU "
      "one thread\n",
      kIn, kHidden, kClasses, kBatch, steps);
  std::vector<std::unique_ptr<Setup>> setups;
  const std::string configs = absl::GetFlag(FLAGS_configs);
  for (int accumulate : {1, 8}) {
    for (int r : {1, 2}) {
      const std::string name =
          (accumulate == 1 ? "cr" : "ga") + std::to_string(r);
      if (configs.find(name) == std::string::npos) continue;
      auto s = Build(r, accumulate, steps);
      if (!s.ok()) {
        std::fprintf(stderr, "%s\n", s.status().ToString().c_str());
        return 1;
      }
      setups.push_back(*std::move(s));
      if (!TimeOneCall(*setups.back()).ok()) return 1;  // Warm-up.
    }
  }
  const bool threads = absl::GetFlag(FLAGS_threads);
  const bool profile = absl::GetFlag(FLAGS_profile);
  if (profile) {
    for (auto& s : setups) {
      if (s->body != nullptr) s->body->set_profiling(true);
    }
  }
  std::vector<std::vector<double>> rate(setups.size());
  std::vector<ProcessTimes> thread_times(setups.size());
  std::vector<double> wall(setups.size(), 0);
  for (int round = 0; round < rounds; ++round) {
    for (size_t i = 0; i < setups.size(); ++i) {
      const ProcessTimes before = threads ? ReadThreadTimes() : ProcessTimes();
      absl::StatusOr<double> t = TimeOneCall(*setups[i]);
      if (!t.ok()) {
        std::fprintf(stderr, "%s\n", t.status().ToString().c_str());
        return 1;
      }
      if (threads) AddDelta(before, ReadThreadTimes(), &thread_times[i]);
      wall[i] += *t;
      rate[i].push_back(setups[i]->replicas * steps * kBatch / *t);
    }
  }
  for (size_t i = 0; i < setups.size(); ++i) {
    const Setup& s = *setups[i];
    std::printf(
        "%-48s %d replica(s): %6.0f samples/s (median of %d; min "
        "%.0f, max %.0f)\n",
        s.accumulate == 1 ? "CrossReplicaOptimizer (all-reduce every step)"
                          : "CrossReplicaGradientAccumulationOptimizerV2(8)",
        s.replicas, Median(rate[i]), rounds,
        *std::min_element(rate[i].begin(), rate[i].end()),
        *std::max_element(rate[i].begin(), rate[i].end()));
    if (profile && s.body != nullptr) {
      PrintProfile(*s.body, absl::GetFlag(FLAGS_profile_top));
    }
    if (threads) {
      PrintThreadTimes(thread_times[i], wall[i],
                       static_cast<int64_t>(rounds) * steps);
    }
    if (s.replicas == 2 && i > 0 && setups[i - 1]->replicas == 1 &&
        setups[i - 1]->accumulate == s.accumulate) {
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
