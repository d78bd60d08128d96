// The MPI job's lifetime as one process sees it: starting MPI, and ending
// the job when this process can no longer take part. Internal to
// core/distributed (MpiLink uses it); docs/DISTRIBUTED.md, "Faults".
//
// Why: MPI_Init_thread, MPI_Comm_dup and MPI_Finalize wait for every other
// process of the job and have no timeout. A process whose peer sleeps, or
// refused its identity, would wait there forever, and `mpirun` with it. So
// once this process has failed as a member of the job (its link is broken,
// its identity refused, or it exits with a non-zero status) its exit ends
// the job with MPI_Abort instead of MPI_Finalize, after printing why.
//
//   RETURN_IF_ERROR(internal::StartMpi(absl::Seconds(60)));
//   ...
//   return internal::FailJob(absl::InvalidArgumentError("..."));
//
// Thread safety: every function may be called from any thread.
#ifndef IPUFLOW_CORE_DISTRIBUTED_MPI_JOB_H_
#define IPUFLOW_CORE_DISTRIBUTED_MPI_JOB_H_

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace ipuflow::distributed::internal {

// Initialises MPI with MPI_THREAD_MULTIPLE unless it is already, and
// registers the exit handler below. MPI_Init_thread waits for every process
// of the job to start MPI: if it has not returned after `timeout`, this
// process prints why and _exits with status 1 (mpirun then ends the job;
// the caller cannot be returned to, it is inside MPI_Init_thread).
// Returns the MPI error, or FailedPrecondition if MPI provides less than
// MPI_THREAD_MULTIPLE (recorded as FailJob).
absl::Status StartMpi(absl::Duration timeout);

// Records that this process failed as a member of the job: its exit will
// end the job (MPI_Abort) rather than wait for the others in MPI_Finalize.
// The first failure stays and is the one printed. Returns `why`.
absl::Status FailJob(absl::Status why);

// The first failure FailJob recorded, OK if none.
absl::Status JobFailure();

}  // namespace ipuflow::distributed::internal

#endif  // IPUFLOW_CORE_DISTRIBUTED_MPI_JOB_H_
