// Executable: something compiled for the emulated IPU system, run over its
// replicas: a device program (a step, a loop, a sharded model) or a
// pipeline. The one execution model of ipuflow, in the shape of PJRT's
// (device, buffer, executable; one Execute over [replica][argument]):
//
//   ASSIGN_OR_RETURN(Executable* exe,
//                    strategy.Compile(graph, {loss}, {train}, {{x, batch}}));
//   std::vector<std::vector<Tensor>> results;              // [replica][fetch]
//   RETURN_IF_ERROR(exe->Execute({{batch}}, &results));    // to every replica
//   ASSIGN_OR_RETURN(auto w, exe->ReadVariables(".*/w"));  // [name][replica]
//
// Layout: replica r uses IPUs [r * S, r * S + S) of the system, where S is
// ipus_per_replica() (a program's shards, a pipeline's stages' IPUs).
// Replica counts come from ReplicationFactor() below, for every kind.
//
// Thread safety: one Execute at a time (a concurrent one returns
// FailedPrecondition); Cancel from any thread; ReadVariables between
// Executes. Destroying an executable while another thread runs it cancels
// that run ("executable destroyed") and waits for it to return. The system
// must outlive its executables; after IPUSystem::Configure they refuse to
// run (FailedPrecondition).
// Errors: a replica's error names it ("replica 1 (IPU 2): ..."); the other
// replicas' waits end with Cancelled ("run cancelled: replica 1 failed:
// ..."); Execute returns the root cause; the next Execute starts afresh.
#ifndef IPUFLOW_CORE_IPU_EXECUTABLE_H_
#define IPUFLOW_CORE_IPU_EXECUTABLE_H_

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/cancellation.h"
#include "core/ipu/ipu_system.h"
#include "core/lifetime_gate.h"
#include "core/mutex.h"
#include "core/tensor.h"

namespace ipuflow {

class Executable {
 public:
  virtual ~Executable() = default;

  virtual IPUSystem* system() const = 0;
  virtual int num_replicas() const = 0;
  virtual int ipus_per_replica() const = 0;
  // `args`: one list of feed values per replica, or a single list that
  // every replica gets. `results` becomes [replica][fetch] (empty lists for
  // executables whose results leave through outfeeds). An error in one
  // replica cancels the others; the root cause is returned.
  virtual absl::Status Execute(const std::vector<std::vector<Tensor>>& args,
                               std::vector<std::vector<Tensor>>* results) = 0;
  // What each IPU of a replica holds, by category, against its budget.
  virtual std::string MemoryReport() const = 0;
  // Cancels the Execute in progress, if any: it returns `reason` (from any
  // thread; a later Execute runs normally).
  void Cancel(absl::Status reason);

  // The values of the variables whose names fully match the RE2 `pattern`
  // ("stage0/w", ".*/w[0-9]"), one per replica, read from each replica's
  // IPUs. NotFound naming the pattern when none matches; InvalidArgument
  // for a bad pattern; FailedPrecondition for an uninitialised variable.
  absl::StatusOr<std::map<std::string, std::vector<Tensor>>> ReadVariables(
      const std::string& pattern) const;

 protected:
  // The value of variable `name` of `replica` when it is not on its IPU
  // (optimizer state offloaded to remote memory between weight updates);
  // nullopt if the executable does not hold it.
  virtual std::optional<Tensor> OffloadedValue(int replica,
                                               const std::string& name) const {
    return std::nullopt;
  }

  // The run bookkeeping every kind shares. BeginRun starts the run `what`
  // ("pipeline 'p'") and returns its cancellation, one per run (Cancel, the
  // destructor and a failing replica wake every wait of the run); Cancelled
  // after CloseRuns, FailedPrecondition while another Execute runs. Every
  // successful BeginRun is followed by EndRun.
  absl::StatusOr<std::shared_ptr<CancellationManager>> BeginRun(
      absl::string_view what);
  void EndRun();
  // First thing in a derived destructor (the run uses its members): refuses
  // later runs, cancels the one in progress ("executable destroyed") and
  // waits for it to return.
  void CloseRuns();

 private:
  // A run holds the gate from BeginRun to EndRun; CloseRuns closes it.
  LifetimeGate gate_;
  Mutex run_mu_;
  bool executing_ ABSL_GUARDED_BY(run_mu_) = false;
  std::shared_ptr<CancellationManager> run_cancel_ ABSL_GUARDED_BY(run_mu_);
};

// The replicas of an executable that uses `ipus_per_replica` IPUs each, on
// `system` (FailedPrecondition when the system has fewer IPUs than one
// replica uses): IPUConfig.replication_factor when set (InvalidArgument naming
// replicas, IPUs per replica and the system's IPUs when they do not fit),
// otherwise every IPU is used: num_ipus / ipus_per_replica, which must
// divide. `what` names the executable in errors ("the program", "pipeline
// 'p'").
absl::StatusOr<int> ReplicationFactor(const IPUSystem& system,
                                      int ipus_per_replica,
                                      const std::string& what);

}  // namespace ipuflow

#endif  // IPUFLOW_CORE_IPU_EXECUTABLE_H_
