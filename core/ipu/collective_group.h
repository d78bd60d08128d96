// CollectiveGroup: the replicas of one device program, as peers in
// cross-replica collectives. AllReduce is a reduce-scatter followed by an
// all-gather between the replica threads: replica r reduces chunk r of every
// replica's input (always in replica order, so every replica gets bitwise
// identical results) and writes it into every replica's output.
//
//   // On each replica's thread, for the same key:
//   RETURN_IF_ERROR(group->AllReduce(replica, "grads/sum", in, out, kSum));
//
// Each key is an independent rendezvous, so collectives that different
// replicas reach in different orders cannot cross. Bytes are counted as a
// ring all-reduce would send them: 2 (R-1)/R x size per replica.
//
// Thread safety: AllReduce is called concurrently by the R replica threads;
// Cancel may be called from any thread and wakes every waiter with the
// given status (an error in one replica must not leave the others blocked).
// An AllReduce that every replica has joined is not interrupted: it finishes
// (without blocking) and returns OK.
#ifndef IPUFLOW_CORE_IPU_COLLECTIVE_GROUP_H_
#define IPUFLOW_CORE_IPU_COLLECTIVE_GROUP_H_

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/mutex.h"
#include "core/tensor.h"

namespace ipuflow {

class CollectiveGroup {
 public:
  enum class ReduceOp { kSum, kMean };

  explicit CollectiveGroup(int num_replicas)
      : num_replicas_(num_replicas), bytes_sent_(num_replicas) {}

  int num_replicas() const { return num_replicas_; }
  // `in` and `out` have the same dtype and shape on every replica; `out`
  // may alias `in`. Returns when every replica's output is written.
  absl::Status AllReduce(int replica, const std::string& key, const Tensor& in,
                         const Tensor& out, ReduceOp op);
  void Cancel(absl::Status reason);
  // Makes a cancelled group usable again and zeroes the byte counts
  // (between runs, with no replica inside AllReduce).
  void Reset();
  // Bytes replica r sent since the last Reset.
  int64_t bytes_sent(int replica) const;

 private:
  struct Rendezvous {
    std::vector<const Tensor*> inputs;
    std::vector<const Tensor*> outputs;
    int arrived = 0;
    uint64_t generation = 0;
  };
  // Reduces elements [begin, end) of every input into every output.
  template <typename T>
  void ReduceChunk(const Rendezvous& r, int64_t begin, int64_t end,
                   ReduceOp op) const;
  // Waits until all replicas reach the barrier of `r`; if `cancellable`,
  // returns the cancellation status instead once the group is cancelled.
  absl::Status Barrier(Rendezvous* r, bool cancellable)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int num_replicas_;
  mutable Mutex mu_;
  CondVar cv_;
  std::map<std::string, std::unique_ptr<Rendezvous>> rendezvous_
      ABSL_GUARDED_BY(mu_);
  absl::Status cancelled_ ABSL_GUARDED_BY(mu_);
  std::vector<std::atomic<int64_t>> bytes_sent_;
};

}  // namespace ipuflow

#endif  // IPUFLOW_CORE_IPU_COLLECTIVE_GROUP_H_
