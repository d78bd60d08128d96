// MpiLink: ProcessLink over Open MPI, the transport PopRun and Horovod use
// underneath (PopRun User Guide, "Configuration"; reference
// anchors_wave3.md section 3). One per process, over a duplicate of
// MPI_COMM_WORLD, so a program's own MPI calls never match ours.
//
// Algorithms (docs/DISTRIBUTED.md, "Reduction order"):
//   FoldAcross: a chain in rank order. The first process of the group adds
//     its members (rank 0 + rank 1 + ...), sends the partial sum to the
//     next, which adds its members in order, and so on; the last divides
//     for a mean and sends the result to every other process. Tensors go
//     in chunks (Options::chunk_bytes), so process k adds chunk c while
//     k - 1 sends chunk c + 1: the chain's latency is paid once per
//     collective, not per chunk.
//   GatherAcross: every process sends its members' inputs to every other.
// Only point-to-point messages: Open MPI's own MPI_Allreduce algorithms
// (ring, Rabenseifner, ...) reassociate the sum, and which one runs depends
// on the process count, the size and coll_tuned settings.
//
// Every wait polls: the collective's cancellation (a local error), a
// failure notice from another process (which then fails here too, naming
// it), and a stall timer (no message for Options::stall_timeout: an error
// naming the collective and the process it waits for). After a failure
// the link is broken: every later call returns the first error at once,
// and the process's exit ends the whole job (MPI_Abort, mpi_job.h) instead
// of waiting for the others in MPI_Finalize. Buffers that MPI may still
// touch are kept until the process ends.
#ifndef IPUFLOW_CORE_DISTRIBUTED_MPI_LINK_H_
#define IPUFLOW_CORE_DISTRIBUTED_MPI_LINK_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/distributed/process_identity.h"
#include "core/ipu/process_link.h"
#include "core/mutex.h"

namespace ipuflow::distributed {

class MpiLink : public ProcessLink {
 public:
  struct Options {
    absl::Duration stall_timeout = absl::Seconds(10);
    // How long World() waits for the other processes to start MPI and to
    // join the link (a slow start is not a stall: processes load data or
    // compile at their own pace before World()).
    absl::Duration start_timeout = absl::Seconds(60);
    int64_t chunk_bytes = 1 << 20;
  };

  // The process's link: initialises MPI with MPI_THREAD_MULTIPLE on the
  // first call (and finalises it at exit), checks the identity MPI reports
  // against the launcher's environment (ProcessIdentityFromEnvironment).
  // Later calls return the same link; `options` of the first call hold.
  // Every process of the job waits here for the others (MPI_Init_thread,
  // then the link's communicator), at most `start_timeout` each: then
  // DeadlineExceeded, or, inside MPI_Init_thread, which cannot return, the
  // process exits with status 1. An error after MPI started (a refused
  // identity, that timeout) is kept: later calls return it, and the
  // process's exit ends the job (MPI_Abort), so that the processes waiting
  // for this one end too.
  static absl::StatusOr<std::shared_ptr<MpiLink>> World(Options options);
  static absl::StatusOr<std::shared_ptr<MpiLink>> World() {
    return World(Options());
  }

  const ProcessIdentity& identity() const { return identity_; }
  int process_index() const override { return identity_.process_index; }
  int process_count() const override { return identity_.process_count; }

  absl::Status FoldAcross(const Collective& c, bool mean, void* out) override;
  absl::Status GatherAcross(const Collective& c, void* out) override;
  absl::Status Broadcast(
      uint64_t tag, int root, void* data, int64_t bytes,
      const std::function<absl::Status()>& cancelled) override;
  absl::StatusOr<std::vector<std::string>> AllGatherStrings(
      uint64_t tag, const std::string& mine) override;

  // Tells every other process that this one failed with `why`: their
  // waits end with an error naming this process. Idempotent.
  void NotifyFailure(const absl::Status& why);

  ~MpiLink() override;

 private:
  struct Wire;  // MPI handles, kept out of this header.
  MpiLink(ProcessIdentity identity, Options options, std::unique_ptr<Wire> w);

  // The MPI tag of `c`'s messages of kind `kind` (0..3); an error if two
  // collectives' names share a tag.
  absl::StatusOr<int> TagOf(uint64_t tag, const std::string& name, int kind);
  absl::Status Broken() const;
  // Marks the link broken with `s` (the first error stays), tells the
  // other processes if `notify`; returns `s`.
  absl::Status Fail(bool notify, absl::Status s);

  const ProcessIdentity identity_;
  const Options options_;
  std::unique_ptr<Wire> wire_;
  mutable Mutex mu_;
  std::map<int, std::string> tag_names_ ABSL_GUARDED_BY(mu_);
  absl::Status broken_ ABSL_GUARDED_BY(mu_);
  bool notified_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace ipuflow::distributed

#endif  // IPUFLOW_CORE_DISTRIBUTED_MPI_LINK_H_
