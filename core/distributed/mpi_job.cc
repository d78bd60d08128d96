#include "core/distributed/mpi_job.h"

#include <mpi.h>
#include <stdlib.h>  // on_exit (glibc)
#include <unistd.h>  // _exit

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "core/distributed/mpi_flight.h"
#include "core/mutex.h"
#include "core/status.h"

namespace ipuflow::distributed::internal {
namespace {

// Never destroyed: the exit handler reads it after static destructors ran.
struct JobState {
  Mutex mu;
  absl::Status failure ABSL_GUARDED_BY(mu);
  bool we_initialized ABSL_GUARDED_BY(mu) = false;
  bool handler_registered ABSL_GUARDED_BY(mu) = false;
};

JobState& State() {
  static JobState* state = new JobState();
  return *state;
}

// Runs when the process exits (on_exit, so it sees the exit status; an
// atexit handler would not). A healthy process finalises as usual: MPI_Finalize
// waits for the others, which is the end of a normal job. A failed one ends
// the job: every other process may be waiting for it, or be the reason it
// failed (asleep), and MPI_Finalize would wait for them forever.
void EndAtExit(int status, void*) {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  std::string why;
  bool we_initialized = false;
  {
    MutexLock l(&State().mu);
    if (!State().failure.ok()) why = State().failure.ToString();
    we_initialized = State().we_initialized;
  }
  if (why.empty() && status != 0) {
    why = absl::StrCat("it exits with status ", status);
  }
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (!why.empty() && size > 1) {
    std::fprintf(stderr,
                 "ipuflow: process %d of %d ends the MPI job (MPI_Abort): %s\n",
                 rank, size, why.c_str());
    std::fflush(nullptr);  // exit() flushes only after this handler.
    MPI_Abort(MPI_COMM_WORLD, status != 0 ? status : 1);
  }
  if (we_initialized) MPI_Finalize();
}

}  // namespace

absl::Status StartMpi(absl::Duration timeout) {
  static Mutex start_mu;
  MutexLock start(&start_mu);
  int initialized = 0, provided = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    // A watchdog rather than a timed wait: MPI_Init_thread cannot be
    // interrupted, and it stays on the caller's thread (the thread MPI
    // then calls the main one).
    Mutex mu;
    CondVar cv;
    bool returned = false;
    std::thread watchdog([&] {
      MutexLock l(&mu);
      if (cv.AwaitWithTimeout(
              &mu, absl::ToChronoNanoseconds(timeout),
              [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return returned; })) {
        return;
      }
      std::fprintf(stderr,
                   "ipuflow: MPI_Init_thread has not returned after %s: a "
                   "process of the job has not started MPI (stalled, or "
                   "ended, before MpiLink::World?). This process exits with "
                   "status 1 so that mpirun ends the job.\n",
                   absl::FormatDuration(timeout).c_str());
      std::fflush(nullptr);
      _exit(1);
    });
    const int rc =
        MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
    {
      MutexLock l(&mu);
      returned = true;
      cv.SignalAll();
    }
    watchdog.join();
    RETURN_IF_ERROR(MpiError(rc, "MPI_Init_thread"));
    MutexLock l(&State().mu);
    State().we_initialized = true;
  } else {
    MPI_Query_thread(&provided);
  }
  {
    MutexLock l(&State().mu);
    if (!State().handler_registered) {
      State().handler_registered = true;
      on_exit(EndAtExit, nullptr);
    }
  }
  if (provided < MPI_THREAD_MULTIPLE) {
    return FailJob(absl::FailedPreconditionError(absl::StrCat(
        "MPI provides thread level ", provided,
        "; ipuflow's replicas call it from several threads and need "
        "MPI_THREAD_MULTIPLE (",
        MPI_THREAD_MULTIPLE, ")")));
  }
  return absl::OkStatus();
}

absl::Status FailJob(absl::Status why) {
  if (why.ok()) return why;
  MutexLock l(&State().mu);
  if (State().failure.ok()) State().failure = why;
  return why;
}

absl::Status JobFailure() {
  MutexLock l(&State().mu);
  return State().failure;
}

}  // namespace ipuflow::distributed::internal
