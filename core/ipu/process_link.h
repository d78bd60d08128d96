// ProcessLink: the other processes of a multi-process run, as the
// collectives see them. Each process owns R local replicas; global replica
// g lives in process g / R (docs/DISTRIBUTED.md). A CollectiveGroup with a
// link meets its local members first, then its leader calls the link once
// per collective with the local inputs; the link carries partial results
// between the processes that hold members of the group.
//
// The reduction order is ipuflow's, not the transport's: members are added
// in global rank order, rank 0 + rank 1 + ..., exactly as one process adds
// them, so P processes x R replicas give bitwise the result of one process
// with P x R replicas whatever algorithm the transport would have picked
// (Open MPI's ring and Rabenseifner all-reduce reassociate the sum; see
// "Open MPI collective algorithms", reference anchors_wave3.md section 3).
//
// The implementation over Open MPI is core/distributed/mpi_link.h; this
// interface keeps core/ipu free of MPI, so the single-process build links
// no MPI at all.
#ifndef IPUFLOW_CORE_IPU_PROCESS_LINK_H_
#define IPUFLOW_CORE_IPU_PROCESS_LINK_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/dtype.h"

namespace ipuflow {

class ProcessLink {
 public:
  virtual ~ProcessLink() = default;

  virtual int process_index() const = 0;
  virtual int process_count() const = 0;

  // One collective's view from this process. `member_process[k]` is the
  // process of the group's rank k (non-decreasing in k); `local` are the
  // inputs (n elements of `dtype` each) of the ranks this process holds, in
  // rank order. `cancelled` is polled while waiting: when it returns a
  // non-OK status, the call returns it.
  struct Collective {
    uint64_t tag = 0;  // Same on every process for the same collective.
    std::string name;  // For errors: the key and the group.
    std::vector<int> member_process;
    DType dtype = DType::kFloat32;
    int64_t n = 0;
    std::vector<const void*> local;
    std::function<absl::Status()> cancelled;
  };

  // `out` (n elements) gets the sum of every member's input in rank order
  // (divided by the group size for `mean`), identical on every process.
  virtual absl::Status FoldAcross(const Collective& c, bool mean,
                                  void* out) = 0;
  // `out` (group size x n elements) gets every member's input in rank
  // order.
  virtual absl::Status GatherAcross(const Collective& c, void* out) = 0;
  // `data` (bytes) of process `root` on every process.
  virtual absl::Status Broadcast(
      uint64_t tag, int root, void* data, int64_t bytes,
      const std::function<absl::Status()>& cancelled) = 0;
  // Every process's `mine`, by process index (for checks that the processes
  // agree, such as the DataLoader's plan keys).
  virtual absl::StatusOr<std::vector<std::string>> AllGatherStrings(
      uint64_t tag, const std::string& mine) = 0;
};

}  // namespace ipuflow

#endif  // IPUFLOW_CORE_IPU_PROCESS_LINK_H_
