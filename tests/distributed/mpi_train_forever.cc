// Run under `mpirun` by mpi_interrupt_test.sh: cross-replica SGD steps on
// 2 local replicas per process, forever, as a long training job is when
// its user presses Ctrl-C. After its first step each process creates
// READY_DIR/ready.<process index>, so the test interrupts a run that is
// inside its collectives, not one still starting.
#include <cstdio>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/distributed/mpi_link.h"
#include "core/ipu/ipu_strategy.h"
#include "ops/array/const.h"
#include "ops/math/mul.h"
#include "ops/math/reduce_sum.h"
#include "ops/state/variable.h"
#include "optimizers/cross_replica.h"
#include "optimizers/gradient_descent.h"

namespace ipuflow {
namespace {

int Main(const std::string& ready_dir) {
  auto link = distributed::MpiLink::World();
  if (!link.ok()) {
    std::fprintf(stderr, "%s\n", link.status().ToString().c_str());
    return 1;
  }
  Scope s = Scope::NewRootScope();
  auto w = ops::Variable(
      s.WithOpName("w"),
      ops::Const<float>(s, std::vector<float>(4096, 1.f), {4096}));
  Output loss = ops::ReduceSum(s, ops::Mul(s, w.value, w.value));
  optimizers::GradientDescentOptimizer sgd(1e-6f);
  optimizers::CrossReplicaOptimizer opt(&sgd);
  Node* train = opt.Minimize(s, loss);
  IPUConfig config;
  config.set_auto_select_ipus(2);
  config.set_replication_factor(2);
  auto system = IPUSystem::Create(config);
  absl::Status st = s.status();
  if (st.ok()) st = system.status();
  if (st.ok()) st = (*system)->SetProcessLink(*link);
  IPUStrategy strategy(system.ok() ? system->get() : nullptr);
  if (st.ok()) st = strategy.Initialize(*s.graph());
  for (long step = 0; st.ok(); ++step) {
    st = strategy.Run(*s.graph(), {}, {train}).status();
    if (step == 0 && st.ok()) {
      std::ofstream(
          absl::StrCat(ready_dir, "/ready.", (*link)->process_index()));
    }
  }
  std::fprintf(stderr, "%s\n", st.ToString().c_str());
  return 1;
}

}  // namespace
}  // namespace ipuflow

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s READY_DIR\n", argv[0]);
    return 2;
  }
  return ipuflow::Main(argv[1]);
}
