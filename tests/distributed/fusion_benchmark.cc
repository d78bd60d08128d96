// Tensor fusion, measured: steps of cross-replica SGD on the gradients of
// the tutorial's ConvNet (examples/models.h: 8 tensors, 250 to 81920
// elements), with one all-reduce per gradient (fusion_threshold_bytes 0)
// beside the default fusion, alternating in one run. Each process has 2
// local replicas; under mpirun the replicas span the processes.
//
//   bazel-bin/tests/distributed/fusion_benchmark            # one process
//   mpirun -np 2 --oversubscribe --allow-run-as-root --bind-to none
//     --mca btl self,vader --mca btl_vader_single_copy_mechanism none
//     bazel-bin/tests/distributed/fusion_benchmark
//
// Process 0 prints the machine and the median step time of each.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/distributed/mpi_link.h"
#include "core/distributed/process_identity.h"
#include "core/ipu/ipu_strategy.h"
#include "core/machine_info.h"
#include "ops/array/const.h"
#include "ops/math/add.h"
#include "ops/math/mul.h"
#include "ops/math/reduce_sum.h"
#include "ops/state/variable.h"
#include "optimizers/cross_replica.h"
#include "optimizers/gradient_descent.h"

namespace ipuflow {
namespace {

constexpr int kLocalReplicas = 2;

struct Model {
  Scope scope = Scope::NewRootScope();
  Node* train = nullptr;
};

// loss = sum_k sum(w_k * w_k): the gradients have the ConvNet's shapes.
void Build(Model* m, optimizers::Optimizer* sgd, int64_t threshold) {
  const Scope& s = m->scope;
  const std::vector<int64_t> sizes = {250, 10, 5000, 20, 81920, 256, 2560, 10};
  Output loss;
  for (size_t k = 0; k < sizes.size(); ++k) {
    auto w = ops::Variable(
        s.WithOpName(absl::StrCat("w", k)),
        ops::Const<float>(s, std::vector<float>(sizes[k], 0.5f), {sizes[k]}));
    Output t = ops::ReduceSum(s, ops::Mul(s, w.value, w.value));
    loss = k == 0 ? t : ops::Add(s, loss, t);
  }
  optimizers::CrossReplicaOptimizer opt(
      sgd, optimizers::ReplicaReduction::kMean, threshold);
  m->train = opt.Minimize(s, loss);
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int Main() {
  std::shared_ptr<ProcessLink> link;
  int me = 0, P = 1;
  auto id = distributed::ProcessIdentityFromEnvironment();
  if (!id.ok()) {
    std::fprintf(stderr, "%s\n", id.status().ToString().c_str());
    return 1;
  }
  if (id->multi_process()) {
    auto l = distributed::MpiLink::World();
    if (!l.ok()) {
      std::fprintf(stderr, "%s\n", l.status().ToString().c_str());
      return 1;
    }
    me = (*l)->process_index();
    P = (*l)->process_count();
    link = *l;
  }
  IPUConfig config;
  config.set_auto_select_ipus(kLocalReplicas);
  config.set_replication_factor(kLocalReplicas);
  auto system = IPUSystem::Create(config);
  absl::Status st = system.status();
  if (st.ok() && link != nullptr) st = (*system)->SetProcessLink(link);
  optimizers::GradientDescentOptimizer sgd(1e-6f);
  Model unfused, fused;
  Build(&unfused, &sgd, 0);
  Build(&fused, &sgd,
        optimizers::CrossReplicaOptimizer::kDefaultFusionThresholdBytes);
  IPUStrategy strategy(st.ok() ? system->get() : nullptr);
  for (Model* m : {&unfused, &fused}) {
    if (st.ok()) st = m->scope.status();
    if (st.ok()) st = strategy.Initialize(*m->scope.graph());
    if (st.ok()) st = strategy.Run(*m->scope.graph(), {}, {m->train}).status();
  }
  if (!st.ok()) {
    std::fprintf(stderr, "%s\n", st.ToString().c_str());
    return 1;
  }
  constexpr int kRounds = 15, kSteps = 20;
  std::vector<double> t_unfused, t_fused;
  for (int round = 0; round < kRounds; ++round) {
    for (Model* m : {&unfused, &fused}) {
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < kSteps && st.ok(); ++i) {
        st = strategy.Run(*m->scope.graph(), {}, {m->train}).status();
      }
      const double dt =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
              .count() /
          kSteps;
      (m == &fused ? t_fused : t_unfused).push_back(dt);
    }
  }
  if (!st.ok()) {
    std::fprintf(stderr, "%s\n", st.ToString().c_str());
    return 1;
  }
  if (me == 0) {
    const double a = Median(t_unfused), b = Median(t_fused);
    std::printf(
        "%s\n%d process(es) x %d replicas; cross-replica SGD step on the "
        "ConvNet's 8 gradients, medians of %d rounds of %d steps, "
        "alternating\n  one all-reduce per gradient: %8.1f us/step\n  "
        "fused (1 MiB buckets):        %8.1f us/step   (%.2fx faster)\n",
        MachineDescription().c_str(), P, kLocalReplicas, kRounds, kSteps,
        a * 1e6, b * 1e6, a / b);
  }
  return 0;
}

}  // namespace
}  // namespace ipuflow

int main() { return ipuflow::Main(); }
