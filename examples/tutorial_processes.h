// The processes of a tutorial run: one, or those `mpirun` started
// (docs/DISTRIBUTED.md). Each process owns --replication-factor local
// replicas; together they train one model, as PopRun's processes do
// (PopTorch user guide 10.1, "Distributed execution").
//
//   ASSIGN_OR_RETURN(TutorialProcesses procs, TutorialProcesses::Join());
//   loader_options.process_index = procs.index();   // The data split.
//   RETURN_IF_ERROR(procs.Link(*system));           // Before compiling.
//   RETURN_IF_ERROR(procs.Agree({loader.get()}));   // Before training.
//
// Only process 0 writes to stdout (the others' is closed on Join), so one
// progress bar and one summary are printed; errors go to stderr on every
// process.
#ifndef IPUFLOW_EXAMPLES_TUTORIAL_PROCESSES_H_
#define IPUFLOW_EXAMPLES_TUTORIAL_PROCESSES_H_

#include <cstdint>
#include <initializer_list>
#include <memory>

#include "absl/status/statusor.h"
#include "core/ipu/ipu_system.h"
#include "core/ipu/process_link.h"
#include "examples/tutorial_flags.h"
#include "examples/tutorial_support.h"
#include "feeds/data_loader.h"

namespace ipuflow::examples {

class TutorialProcesses {
 public:
  // Reads the launcher's identity (Open MPI or PopRun variables) and, under
  // a launcher, connects the processes. A single process needs no MPI.
  static absl::StatusOr<TutorialProcesses> Join();

  int index() const { return index_; }
  int count() const { return count_; }

  // Makes `system` this process's share (IPUSystem::SetProcessLink).
  absl::Status Link(IPUSystem& system) const;
  // Every process checks that the others split each loader's data the
  // same way.
  absl::Status Agree(
      std::initializer_list<const feeds::DataLoader*> loaders) const;
  // The sums of `a` and `b` over the processes (on every process).
  absl::StatusOr<std::pair<double, int64_t>> Sum(double a, int64_t b);
  // An OutfeedMonitor's progress bar for the whole run: a training of
  // `steps` steps (micro-batches per replica) whose first `first_step`
  // were done before (--resume), `replicas` per process. Drawn by process
  // 0 only, counting every process's micro-batches (all train in step).
  ProgressCallback ProgressBar(int64_t first_step, int64_t steps,
                               int replicas) const;

 private:
  int index_ = 0;
  int count_ = 1;
  std::shared_ptr<ProcessLink> link_;  // Null for one process.
  uint64_t next_tag_ = 0x7E570000;  // Of the next Sum (same on every process).
};

// An example's main(): joins the processes, parses the flags (knowing how
// many processes train) and calls `run`. A failure is printed to stderr
// (after stdout is flushed) and gives exit status 1.
int TutorialMain(int argc, char** argv,
                 absl::Status (*run)(const TutorialFlags&, TutorialProcesses&));

}  // namespace ipuflow::examples

#endif  // IPUFLOW_EXAMPLES_TUTORIAL_PROCESSES_H_
