// IPUStrategy: the one entry point that compiles computations into
// Executables (executable.h) and runs them on every replica of the IPU
// system: a graph's fetches and targets become a DeviceProgram, whatever
// the graph holds (steps, device loops, sharded models, a pipeline's frame
// node: device_frame.h), one way for every kind. Compiled programs are
// cached by the graph's fingerprint, the fetches, targets and feed shapes
// and the system's configuration, so running the same step again does not
// recompile.
//
//   IPUStrategy strategy(system.get());
//   RETURN_IF_ERROR(strategy.Initialize(*scope.graph()));   // every replica
//   ASSIGN_OR_RETURN(std::vector<Tensor> out,
//                    strategy.Run(*scope.graph(), {loss}, {train_op}));
//   strategy.num_compiles();   // 2 (initializers, step), however many Runs
//
// With several replicas each fetch gets a leading replica dimension.
//
//   ASSIGN_OR_RETURN(auto pipeline,
//                    pipelining::Pipeline::Create(scope, options));
//   RETURN_IF_ERROR(strategy.Initialize(*scope.graph()));  // its variables
//   ASSIGN_OR_RETURN(
//       DeviceProgram* exe,  // as for a loop
//       strategy.Compile(*scope.graph(), {}, {pipeline->frame()}));
//   std::vector<std::vector<Tensor>> results;
//   RETURN_IF_ERROR(exe->Execute({{}}, &results));  // results: by outfeed
//   auto report = pipeline->last_report();          // replica 0's
//   ASSIGN_OR_RETURN(auto w, exe->ReadVariables(".*/w"));  // per replica
//
// Ownership: the strategy owns the executables it compiles; an Executable*
// it returns is valid while the strategy lives (after a reconfiguration of
// the system it refuses to run: FailedPrecondition).
// Thread safety: Compile and Run may be called from several threads
// (compiles are serialised; one executable runs one Execute at a time, a
// concurrent one gets FailedPrecondition). Destroying the strategy while
// another thread runs it cancels the runs ("strategy destroyed") and waits
// for them to return; later calls are a use after free, as for any object.
#ifndef IPUFLOW_CORE_IPU_IPU_STRATEGY_H_
#define IPUFLOW_CORE_IPU_IPU_STRATEGY_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/ipu/device_program.h"
#include "core/lifetime_gate.h"
#include "core/session.h"

namespace ipuflow {

class IPUStrategy {
 public:
  // `system` is not owned and must outlive the strategy.
  explicit IPUStrategy(IPUSystem* system) : system_(system) {}
  ~IPUStrategy();

  IPUSystem* system() const { return system_; }
  // The compiled program for this step (compiling it on first use).
  absl::StatusOr<DeviceProgram*> Compile(const Graph& graph,
                                         const std::vector<Output>& fetches,
                                         const std::vector<Node*>& targets,
                                         const FeedList& feeds = {});
  absl::StatusOr<std::vector<Tensor>> Run(
      const Graph& graph, const std::vector<Output>& fetches,
      const std::vector<Node*>& targets = {}, const FeedList& feeds = {});
  // Runs the graph's "initializers" on every replica; in a multi-process
  // run every replica then takes global replica 0's values (a collective:
  // broadcast_variables.h).
  absl::Status Initialize(const Graph& graph);
  int num_compiles() const;

 private:
  absl::StatusOr<DeviceProgram*> CompileLocked(
      const Graph& graph, const std::vector<Output>& fetches,
      const std::vector<Node*>& targets, const FeedList& feeds)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  IPUSystem* system_;
  // Calls in progress (the destructor closes it and waits for them).
  LifetimeGate gate_;
  mutable Mutex mu_;
  std::map<std::string, std::unique_ptr<DeviceProgram>> cache_
      ABSL_GUARDED_BY(mu_);
  int num_compiles_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ipuflow

#endif  // IPUFLOW_CORE_IPU_IPU_STRATEGY_H_
