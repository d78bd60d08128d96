// CollectiveGroup: the replicas of one device program, as peers in
// cross-replica collectives: AllReduce, ReduceScatter and AllGather, over
// all replicas or within replica groups (ReplicaGroups, below).
//
//   // On each replica's thread, for the same key:
//   RETURN_IF_ERROR(group->AllReduce(replica, "grads/sum", in, out, kSum));
//   // Replica with rank i in its group of G gets chunk i (ceil(n/G)
//   // elements, zero-padded) of the sum over its group:
//   RETURN_IF_ERROR(group->ReduceScatter(replica, "rs", in, shard, kSum,
//                                        ReplicaGroups::Consecutive(2)));
//   // Every member gets [G * n]: the members' inputs in rank order.
//   RETURN_IF_ERROR(group->AllGather(replica, "ag", shard, full));
//
// AllReduce is a reduce-scatter followed by an all-gather: the member with
// rank i reduces chunk i of every member's input and writes it into every
// member's output. Reductions always add the members' inputs in rank order,
// so results are bitwise identical on every member. Each (key, group) is an
// independent rendezvous, so collectives that replicas reach in different
// orders cannot cross. Bytes are counted per replica as a ring would send
// them (G = group size): all-reduce 2 (G-1)/G x size, reduce-scatter
// (G-1)/G x padded input size, all-gather (G-1)/G x output size.
//
// Cost: two barriers per collective (inputs published; every member done
// writing), each a short spin on an atomic before sleeping, and no copy of
// the input unless the output overlaps it.
//
// Across processes (a ProcessLink, core/ipu/process_link.h): the group
// has R local replicas of P x R global ones; replica arguments are local
// indices, groups and ranks are global. The local members of a group meet
// as above, then the first of them carries their inputs to the link, which
// continues the same rank-order sum through the other processes: bitwise
// the result of one process with P x R replicas.
//
// Thread safety: collectives are called concurrently by the R replica
// threads; Cancel may be called from any thread and wakes every waiter with
// the given status (an error in one replica must not leave the others
// blocked). A collective that every member has joined is not interrupted:
// it finishes (without blocking) and returns OK.
#ifndef IPUFLOW_CORE_IPU_COLLECTIVE_GROUP_H_
#define IPUFLOW_CORE_IPU_COLLECTIVE_GROUP_H_

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/ipu/process_link.h"
#include "core/mutex.h"
#include "core/tensor.h"

namespace ipuflow {

// Which replicas take part together in a collective, as Graphcore's
// CommGroup (PopART `CommGroupType` doc comment, "PopART equivalent of GCL
// CommGroupType", willow/include/popart/commgroup.hpp). With N replicas and
// group size k:
//   All:            one group {0, ... N-1} (size ignored).
//   Consecutive(k): N/k groups {0, ... k-1}, {k, ... 2k-1}, ...
//   Orthogonal(k):  m = N/k groups {0, m, 2m, ...}, {1, m+1, ...}, ...
//                   {m-1, 2m-1, ... N-1}: strided across the consecutive ones.
// A replica's rank is its position in its group (the order of the lists).
struct ReplicaGroups {
  enum class Type { kAll, kConsecutive, kOrthogonal };
  Type type = Type::kAll;
  int size = 0;

  static ReplicaGroups All() { return {}; }
  static ReplicaGroups Consecutive(int size) {
    return {Type::kConsecutive, size};
  }
  static ReplicaGroups Orthogonal(int size) {
    return {Type::kOrthogonal, size};
  }

  // The group size for `num_replicas` replicas; InvalidArgument naming the
  // size and the replica count unless 1 <= size and size divides it.
  absl::StatusOr<int> GroupSize(int num_replicas) const;
  // REQUIRES: GroupSize(num_replicas) is OK.
  int Rank(int replica, int num_replicas) const;
  // Which group `replica` is in, in [0, num_replicas / group size).
  int GroupIndex(int replica, int num_replicas) const;
  // The replica with rank `rank` in `replica`'s group.
  int Member(int replica, int rank, int num_replicas) const;
  std::string DebugString() const;  // "all", "consecutive(2)", ...
};

class CollectiveGroup {
 public:
  // kLocal (reduce-scatter only): each member keeps chunk `rank` of its own
  // input, no exchange (TF's COLLECTIVE_OP_LOCAL, used to shard a tensor
  // that is already identical on every replica).
  enum class ReduceOp { kSum, kMean, kLocal };

  explicit CollectiveGroup(int num_replicas)
      : num_replicas_(num_replicas),
        local_replicas_(num_replicas),
        bytes_sent_(num_replicas) {}
  // `local_replicas` of this process's; `link`'s other processes hold as
  // many each. `program_tag` tells this group's collectives from another
  // program's on the wire: every process must give the same program the
  // same tag (the n-th program compiled, when every process compiles the
  // same programs in the same order).
  CollectiveGroup(int local_replicas, std::shared_ptr<ProcessLink> link,
                  uint64_t program_tag);

  // Global replicas: local_replicas() x the processes.
  int num_replicas() const { return num_replicas_; }
  int local_replicas() const { return local_replicas_; }
  // The global index of local replica `replica`.
  int global_replica(int replica) const { return first_replica_ + replica; }

  // `in` and `out` have the same dtype and shape; every member's `in` has
  // the same dtype and element count. `out` may alias `in`. Returns when
  // every member's output is written.
  absl::Status AllReduce(int replica, const std::string& key, const Tensor& in,
                         const Tensor& out, ReduceOp op,
                         const ReplicaGroups& groups = ReplicaGroups::All());
  // `in` (any shape, n elements, read flat) is reduced over the group; `out`
  // has ceil(n/G) elements and gets chunk `rank` of the reduction, with
  // zeros past element n (the padding).
  absl::Status ReduceScatter(
      int replica, const std::string& key, const Tensor& in, const Tensor& out,
      ReduceOp op, const ReplicaGroups& groups = ReplicaGroups::All());
  // `out` has G x n elements: member k's `in` (flat) at [k n, (k+1) n).
  absl::Status AllGather(int replica, const std::string& key, const Tensor& in,
                         const Tensor& out,
                         const ReplicaGroups& groups = ReplicaGroups::All());

  void Cancel(absl::Status reason);
  // Makes a cancelled group usable again and zeroes the byte counts
  // (between runs, with no replica inside a collective).
  void Reset();
  // Bytes replica r sent since the last Reset.
  int64_t bytes_sent(int replica) const;

 private:
  enum class Kind { kAllReduce, kReduceScatter, kAllGather };
  // One (key, group)'s meeting point. Arrivals count under mu_; the last
  // one advances `generation`, which waiters first spin on (no lock, no
  // futex when the members arrive within the spin budget), then sleep on
  // `cv` (signalled only when someone sleeps).
  struct Rendezvous {
    explicit Rendezvous(int size) : inputs(size), outputs(size) {}
    std::vector<const Tensor*> inputs;   // By rank.
    std::vector<const Tensor*> outputs;  // By rank.
    int arrived = 0;                     // Guarded by mu_.
    int sleepers = 0;                    // Guarded by mu_.
    // Written under mu_ (release), read by spinning waiters (acquire).
    std::atomic<uint64_t> generation{0};
    CondVar cv;
    absl::Status mismatch;  // Set by the last arrival: inputs disagree.
    absl::Status across;    // Set by the leader: what the link returned.
  };
  // One member's call, checked (CheckCall): what it asks and where its
  // chunk [begin, end) of the input's n elements lies.
  struct Call {
    Kind kind;
    const char* name;  // "AllReduce", ... for errors.
    int replica;       // Local.
    const Tensor* in;
    const Tensor* out;
    ReduceOp op;
    int group_size, rank;
    int64_t n, chunk, begin, end;
    size_t esize;
    // What a ring implementation sends from this member (the transfer
    // counters): 2(g-1)/g of the input for all-reduce, g-1 chunks for
    // reduce-scatter, g-1 inputs for all-gather.
    int64_t BytesSent() const;
  };
  // The group's members in this process (all of them without a link):
  // the first one's rank, how many, and each rank's process when they
  // are spread over processes (empty otherwise).
  struct LocalMembers {
    int first_rank = 0, size = 0;
    std::vector<int> process;
  };
  absl::Status Run(Kind kind, int replica, const std::string& key,
                   const Tensor& in, const Tensor& out, ReduceOp op,
                   const ReplicaGroups& groups);
  // InvalidArgument naming the collective, the replica, a dtype or a shape
  // at fault.
  absl::StatusOr<Call> CheckCall(Kind kind, int replica, const Tensor& in,
                                 const Tensor& out, ReduceOp op,
                                 const ReplicaGroups& groups) const;
  LocalMembers FindLocalMembers(int global, int group_size,
                                const ReplicaGroups& groups) const;
  // A group of one, or the local op: the result is this member's input.
  static void RunAlone(const Call& c);
  // Phase 2 of a group in one process: this member's share of the work,
  // on every member's published buffers.
  static void RunShare(const Call& c, const Rendezvous& r);
  // Phase 2 of a group spread over processes, run by its first local
  // member for all of them.
  absl::Status RunAcross(Kind kind, const std::string& tag_key,
                         const std::vector<int>& member_process,
                         const Rendezvous& r, int64_t n, DType dtype,
                         ReduceOp op, int first_rank);
  // Reduces elements [begin, end) of every input in rank order into `dst`
  // (which must hold end - begin elements).
  template <typename T>
  static void ReduceInto(const Rendezvous& r, int64_t begin, int64_t end,
                         ReduceOp op, T* dst);
  // Waits until all members reach the barrier of `r`; if `cancellable`,
  // returns the cancellation status instead once the group is cancelled.
  // Called with mu_ held; returns with it held (it is released while
  // spinning and sleeping).
  absl::Status Barrier(Rendezvous* r, bool cancellable)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int num_replicas_;    // Global.
  const int local_replicas_;  // This process's.
  int first_replica_ = 0;     // Global index of local replica 0.
  std::shared_ptr<ProcessLink> link_;
  uint64_t program_tag_ = 0;
  mutable Mutex mu_;
  std::map<std::string, std::unique_ptr<Rendezvous>> rendezvous_
      ABSL_GUARDED_BY(mu_);
  absl::Status cancelled_ ABSL_GUARDED_BY(mu_);
  // !cancelled_.ok(), for spinning waiters (the decision is made under mu_).
  std::atomic<bool> cancelled_hint_{false};
  std::vector<std::atomic<int64_t>> bytes_sent_;
};

}  // namespace ipuflow

#endif  // IPUFLOW_CORE_IPU_COLLECTIVE_GROUP_H_
