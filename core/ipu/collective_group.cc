#include "core/ipu/collective_group.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/half.h"
#include "core/ipu/spin_wait.h"

namespace ipuflow {

absl::StatusOr<int> ReplicaGroups::GroupSize(int num_replicas) const {
  if (type == Type::kAll) return num_replicas;
  if (size < 1 || num_replicas % size != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("replica group size ", size, " (", DebugString(),
                     ") must be at least 1 and divide the number of replicas, ",
                     num_replicas));
  }
  return size;
}

int ReplicaGroups::Rank(int replica, int num_replicas) const {
  switch (type) {
    case Type::kAll:
      return replica;
    case Type::kConsecutive:
      return replica % size;
    case Type::kOrthogonal:
      return replica / (num_replicas / size);
  }
  return 0;
}

int ReplicaGroups::GroupIndex(int replica, int num_replicas) const {
  switch (type) {
    case Type::kAll:
      return 0;
    case Type::kConsecutive:
      return replica / size;
    case Type::kOrthogonal:
      return replica % (num_replicas / size);
  }
  return 0;
}

int ReplicaGroups::Member(int replica, int rank, int num_replicas) const {
  switch (type) {
    case Type::kAll:
      return rank;
    case Type::kConsecutive:
      return (replica / size) * size + rank;
    case Type::kOrthogonal: {
      const int stride = num_replicas / size;  // The number of groups.
      return replica % stride + rank * stride;
    }
  }
  return 0;
}

std::string ReplicaGroups::DebugString() const {
  switch (type) {
    case Type::kAll:
      return "all";
    case Type::kConsecutive:
      return absl::StrCat("consecutive(", size, ")");
    case Type::kOrthogonal:
      return absl::StrCat("orthogonal(", size, ")");
  }
  return "?";
}

template <typename T>
void CollectiveGroup::ReduceInto(const Rendezvous& r, int64_t begin,
                                 int64_t end, ReduceOp op, T* dst) {
  using Arr = Eigen::Array<T, Eigen::Dynamic, 1>;
  const int64_t n = end - begin;
  Eigen::Map<Arr> acc(dst, n);
  // Always rank 0 + rank 1 + ...: the same bits on every member.
  const int size = static_cast<int>(r.inputs.size());
  auto in = [&](int k) {
    return Eigen::Map<const Arr>(r.inputs[k]->data<T>() + begin, n);
  };
  if (size == 1) {
    acc = in(0);  // Its own sum and mean.
    return;
  }
  // The first two ranks in one pass, and a pair's mean in the same pass:
  // one pass fewer over memory, the same operations per element.
  if (size == 2 && op == ReduceOp::kMean) {
    acc = (in(0) + in(1)) / static_cast<T>(2);
    return;
  }
  acc = in(0) + in(1);
  for (int k = 2; k < size; ++k) acc += in(k);
  if (op == ReduceOp::kMean) acc /= static_cast<T>(size);
}

// Spin budget of a waiting member: the members run the same program on
// their own IPU threads, so they usually arrive within microseconds of each
// other; a member that is much later costs the others one budget of CPU,
// then they sleep. On a loaded 2-vCPU machine 0 and 20 us measured alike
// (tests/replication_benchmark); the spin pays when cores are free.
constexpr std::chrono::microseconds kBarrierSpin{10};

// All-reduce writes its reduced chunk to the other members' outputs in
// blocks this size (half of a 32 KiB L1), each right after reducing it.
constexpr int64_t kCopyBlockBytes = 16 << 10;

absl::Status CollectiveGroup::Barrier(Rendezvous* r, bool cancellable) {
  if (cancellable && !cancelled_.ok()) return cancelled_;
  const uint64_t gen = r->generation.load(std::memory_order_relaxed);
  const int size = static_cast<int>(r->inputs.size());
  if (++r->arrived == size) {
    if (cancellable) {
      // Phase 1: every member's buffers are published; check they agree
      // here, under the lock, while every member is still waiting.
      r->mismatch = absl::OkStatus();
      for (int k = 1; k < size; ++k) {
        const Tensor& a = *r->inputs[0];
        const Tensor& b = *r->inputs[k];
        if (a.dtype() != b.dtype() || a.NumElements() != b.NumElements()) {
          r->mismatch = absl::InvalidArgumentError(absl::StrCat(
              "replicas disagree on the input: rank 0 has ",
              DTypeName(a.dtype()), a.shape().DebugString(), ", rank ", k,
              " has ", DTypeName(b.dtype()), b.shape().DebugString()));
          break;
        }
      }
    }
    r->arrived = 0;
    // Release: the waiters that see the new generation without mu_ see
    // every member's published buffers and the verdict.
    r->generation.store(gen + 1, std::memory_order_release);
    if (r->sleepers > 0) r->cv.SignalAll();
    return absl::OkStatus();
  }
  // Spin without the lock; every decision is made under it below (a member
  // leaves on a cancel only if the barrier has not completed: a completed
  // phase 1 is never abandoned, whatever the spin saw).
  mu_.Unlock();
  SpinUntil(
      [&] {
        return r->generation.load(std::memory_order_acquire) != gen ||
               (cancellable && cancelled_hint_.load(std::memory_order_acquire));
      },
      kBarrierSpin);
  mu_.Lock();
  ++r->sleepers;
  r->cv.Await(&mu_, [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return r->generation.load(std::memory_order_relaxed) != gen ||
           (cancellable && !cancelled_.ok());
  });
  --r->sleepers;
  return r->generation.load(std::memory_order_relaxed) != gen ? absl::OkStatus()
                                                              : cancelled_;
}

absl::Status CollectiveGroup::AllReduce(int replica, const std::string& key,
                                        const Tensor& in, const Tensor& out,
                                        ReduceOp op,
                                        const ReplicaGroups& groups) {
  return Run(Kind::kAllReduce, replica, key, in, out, op, groups);
}

absl::Status CollectiveGroup::ReduceScatter(int replica, const std::string& key,
                                            const Tensor& in, const Tensor& out,
                                            ReduceOp op,
                                            const ReplicaGroups& groups) {
  return Run(Kind::kReduceScatter, replica, key, in, out, op, groups);
}

absl::Status CollectiveGroup::AllGather(int replica, const std::string& key,
                                        const Tensor& in, const Tensor& out,
                                        const ReplicaGroups& groups) {
  return Run(Kind::kAllGather, replica, key, in, out, ReduceOp::kSum, groups);
}

int64_t CollectiveGroup::Call::BytesSent() const {
  const int64_t bytes = static_cast<int64_t>(in->TotalBytes());
  switch (kind) {
    case Kind::kAllReduce:
      return 2 * (group_size - 1) * bytes / group_size;
    case Kind::kReduceScatter:
      return (group_size - 1) * chunk * static_cast<int64_t>(esize);
    case Kind::kAllGather:
      return (group_size - 1) * bytes;
  }
  return 0;
}

absl::StatusOr<CollectiveGroup::Call> CollectiveGroup::CheckCall(
    Kind kind, int replica, const Tensor& in, const Tensor& out, ReduceOp op,
    const ReplicaGroups& groups) const {
  const char* name = kind == Kind::kAllReduce       ? "AllReduce"
                     : kind == Kind::kReduceScatter ? "ReduceScatter"
                                                    : "AllGather";
  if (replica < 0 || replica >= local_replicas_) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": replica ", replica, " of ", local_replicas_));
  }
  ASSIGN_OR_RETURN(const int g, groups.GroupSize(num_replicas_));
  if (in.dtype() != DType::kFloat32 && in.dtype() != DType::kFloat16 &&
      in.dtype() != DType::kInt32 && in.dtype() != DType::kInt64) {
    return absl::InvalidArgumentError(
        absl::StrCat("cross-replica ", name, " of ", DTypeName(in.dtype()),
                     " is not supported"));
  }
  if (op == ReduceOp::kLocal && kind != Kind::kReduceScatter) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": the local op is for ReduceScatter only"));
  }
  const int64_t n = in.NumElements();
  const int64_t chunk = (n + g - 1) / g;
  const int64_t expected = kind == Kind::kAllReduce       ? n
                           : kind == Kind::kReduceScatter ? chunk
                                                          : g * n;
  if (out.dtype() != in.dtype() || out.NumElements() != expected ||
      (kind == Kind::kAllReduce && out.shape() != in.shape())) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ": output is ", DTypeName(out.dtype()), out.shape().DebugString(),
        ", expected ", DTypeName(in.dtype()), " with ", expected,
        " elements for input ", in.shape().DebugString(), " and group size ",
        g));
  }
  const int rank = groups.Rank(first_replica_ + replica, num_replicas_);
  const int64_t begin = std::min(n, chunk * rank);
  return Call{kind,
              name,
              replica,
              &in,
              &out,
              op,
              g,
              rank,
              n,
              chunk,
              begin,
              std::min(n, begin + chunk),
              DTypeSize(in.dtype())};
}

CollectiveGroup::LocalMembers CollectiveGroup::FindLocalMembers(
    int global, int group_size, const ReplicaGroups& groups) const {
  LocalMembers m;
  m.size = group_size;
  if (link_ == nullptr) return m;
  m.process.resize(group_size);
  for (int k = 0; k < group_size; ++k) {
    m.process[k] = groups.Member(global, k, num_replicas_) / local_replicas_;
  }
  const int me = link_->process_index();
  m.first_rank = static_cast<int>(
      std::find(m.process.begin(), m.process.end(), me) - m.process.begin());
  m.size = static_cast<int>(std::count(m.process.begin(), m.process.end(), me));
  if (m.size == group_size) m.process.clear();  // All of them here.
  return m;
}

void CollectiveGroup::RunAlone(const Call& c) {
  auto* out = static_cast<char*>(c.out->raw_data());
  if (c.kind == Kind::kReduceScatter) {
    std::memmove(out,
                 static_cast<const char*>(c.in->raw_data()) + c.begin * c.esize,
                 (c.end - c.begin) * c.esize);
    std::memset(out + (c.end - c.begin) * c.esize, 0,
                (c.chunk - (c.end - c.begin)) * c.esize);
  } else if (out != c.in->raw_data()) {
    std::memmove(out, c.in->raw_data(), c.n * c.esize);
  }
}

void CollectiveGroup::RunShare(const Call& c, const Rendezvous& r) {
  auto* out = static_cast<char*>(c.out->raw_data());
  const size_t esize = c.esize;
  switch (c.kind) {
    case Kind::kAllReduce:
      // Reduce chunk `rank` once, then write it into every output, a
      // block at a time: the copies read the block from L1, not memory.
      for (int64_t b = c.begin; b < c.end; b += kCopyBlockBytes / esize) {
        const int64_t e = std::min<int64_t>(c.end, b + kCopyBlockBytes / esize);
        IPUFLOW_SWITCH_NUMERIC(
            c.in->dtype(), ReduceInto<T>(r, b, e, c.op, c.out->data<T>() + b),
            break);
        for (int k = 0; k < c.group_size; ++k) {
          if (k == c.rank) continue;
          std::memcpy(static_cast<char*>(r.outputs[k]->raw_data()) + b * esize,
                      out + b * esize, (e - b) * esize);
        }
      }
      break;
    case Kind::kReduceScatter:
      if (c.end > c.begin) {
        IPUFLOW_SWITCH_NUMERIC(
            c.in->dtype(),
            ReduceInto<T>(r, c.begin, c.end, c.op, c.out->data<T>()), break);
      }
      std::memset(out + (c.end - c.begin) * esize, 0,
                  (c.chunk - (c.end - c.begin)) * esize);
      break;
    case Kind::kAllGather:
      for (int k = 0; k < c.group_size; ++k) {
        std::memcpy(out + k * c.n * esize, r.inputs[k]->raw_data(),
                    c.n * esize);
      }
      break;
  }
}

absl::Status CollectiveGroup::Run(Kind kind, int replica,
                                  const std::string& key, const Tensor& in,
                                  const Tensor& out, ReduceOp op,
                                  const ReplicaGroups& groups) {
  ASSIGN_OR_RETURN(const Call c, CheckCall(kind, replica, in, out, op, groups));
  if (c.group_size == 1 || op == ReduceOp::kLocal) {
    // Nothing to exchange: the result depends on this member's input only.
    RunAlone(c);
    return absl::OkStatus();
  }
  const int global = first_replica_ + replica;
  const LocalMembers local = FindLocalMembers(global, c.group_size, groups);
  const int local_rank = c.rank - local.first_rank;

  // Phase 1: publish this member's buffers. When `out` overlaps `in`, a
  // local copy of the input is published instead (chunks are written while
  // others still read); otherwise the input itself, with no copy.
  const char* in_begin = static_cast<const char*>(in.raw_data());
  const char* out_begin = static_cast<const char*>(out.raw_data());
  const bool overlap = in_begin < out_begin + out.TotalBytes() &&
                       out_begin < in_begin + in.TotalBytes();
  Tensor copy;
  if (overlap) copy = in.Copy();
  // One rendezvous per group: the groups of one collective run apart.
  const std::string group_key =
      absl::StrCat(key, "@", groups.DebugString(), "#",
                   groups.GroupIndex(global, num_replicas_));
  Rendezvous* r;
  {
    MutexLock l(&mu_);
    auto& slot = rendezvous_[group_key];
    if (!slot) slot = std::make_unique<Rendezvous>(local.size);
    r = slot.get();
    r->inputs[local_rank] = overlap ? &copy : &in;
    r->outputs[local_rank] = &out;
    RETURN_IF_ERROR(Barrier(r, /*cancellable=*/true));
    // Every member sees the same verdict and none reads another's buffers.
    if (!r->mismatch.ok()) {
      return absl::Status(r->mismatch.code(),
                          absl::StrCat(c.name, ": ", r->mismatch.message()));
    }
  }
  // Phase 2: across processes, the first local member runs it for all;
  // in one process, each member its share.
  if (!local.process.empty() && local_rank == 0) {
    r->across = RunAcross(kind, group_key, local.process, *r, c.n, in.dtype(),
                          op, local.first_rank);
  } else if (local.process.empty()) {
    RunShare(c, *r);
  }
  bytes_sent_[replica].fetch_add(c.BytesSent(), std::memory_order_relaxed);
  // Phase 3: nobody leaves (freeing `copy`) until every member is done.
  // Not cancellable: leaving on Cancel() would free `copy` while others
  // still read it. Every member passed phase 1 and phase 2 never blocks, so
  // all of them get here.
  MutexLock l(&mu_);
  RETURN_IF_ERROR(Barrier(r, /*cancellable=*/false));
  if (local.process.empty() || r->across.ok()) return absl::OkStatus();
  return absl::Status(r->across.code(),
                      absl::StrCat(c.name, ": ", r->across.message()));
}

namespace {

// FNV-1a: the same tag for the same collective on every process (absl's
// hash is seeded per process).
uint64_t StableHash(uint64_t seed, const std::string& s) {
  uint64_t h = 1469598103934665603ull ^ seed;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace

CollectiveGroup::CollectiveGroup(int local_replicas,
                                 std::shared_ptr<ProcessLink> link,
                                 uint64_t program_tag)
    : num_replicas_(local_replicas * link->process_count()),
      local_replicas_(local_replicas),
      first_replica_(local_replicas * link->process_index()),
      link_(std::move(link)),
      program_tag_(program_tag),
      bytes_sent_(local_replicas) {}

absl::Status CollectiveGroup::RunAcross(Kind kind, const std::string& tag_key,
                                        const std::vector<int>& member_process,
                                        const Rendezvous& r, int64_t n,
                                        DType dtype, ReduceOp op,
                                        int first_rank) {
  ProcessLink::Collective c;
  c.tag = StableHash(program_tag_, tag_key);
  c.name = tag_key;
  c.member_process = member_process;
  c.dtype = dtype;
  c.n = n;
  for (const Tensor* t : r.inputs) c.local.push_back(t->raw_data());
  c.cancelled = [this]() -> absl::Status {
    if (!cancelled_hint_.load(std::memory_order_acquire)) {
      return absl::OkStatus();
    }
    MutexLock l(&mu_);
    return cancelled_;
  };
  const int g = static_cast<int>(member_process.size());
  const size_t esize = DTypeSize(dtype);
  const int local = static_cast<int>(r.outputs.size());
  auto copy_to_others = [&](const void* from, int64_t bytes) {
    for (int k = 1; k < local; ++k) {
      std::memcpy(r.outputs[k]->raw_data(), from, bytes);
    }
  };
  switch (kind) {
    case Kind::kAllReduce: {
      void* out = r.outputs[0]->raw_data();
      RETURN_IF_ERROR(link_->FoldAcross(c, op == ReduceOp::kMean, out));
      copy_to_others(out, n * esize);
      return absl::OkStatus();
    }
    case Kind::kReduceScatter: {
      std::vector<char> full(n * esize);
      RETURN_IF_ERROR(link_->FoldAcross(c, op == ReduceOp::kMean, full.data()));
      const int64_t chunk = (n + g - 1) / g;
      for (int k = 0; k < local; ++k) {
        const int64_t begin = std::min(n, chunk * (first_rank + k));
        const int64_t end = std::min(n, begin + chunk);
        auto* dst = static_cast<char*>(r.outputs[k]->raw_data());
        std::memcpy(dst, full.data() + begin * esize, (end - begin) * esize);
        std::memset(dst + (end - begin) * esize, 0,
                    (chunk - (end - begin)) * esize);
      }
      return absl::OkStatus();
    }
    case Kind::kAllGather: {
      void* out = r.outputs[0]->raw_data();
      RETURN_IF_ERROR(link_->GatherAcross(c, out));
      copy_to_others(out, g * n * esize);
      return absl::OkStatus();
    }
  }
  return absl::InternalError("unknown collective kind");
}

void CollectiveGroup::Cancel(absl::Status reason) {
  MutexLock l(&mu_);
  if (cancelled_.ok()) cancelled_ = std::move(reason);
  if (cancelled_.ok())
    cancelled_ = absl::CancelledError("collectives cancelled");
  cancelled_hint_.store(true, std::memory_order_release);
  for (auto& [key, r] : rendezvous_) r->cv.SignalAll();
}

void CollectiveGroup::Reset() {
  MutexLock l(&mu_);
  cancelled_ = absl::OkStatus();
  cancelled_hint_.store(false, std::memory_order_release);
  for (auto& [key, r] : rendezvous_) r->arrived = 0;
  for (auto& b : bytes_sent_) b.store(0, std::memory_order_relaxed);
}

int64_t CollectiveGroup::bytes_sent(int replica) const {
  return bytes_sent_[replica].load(std::memory_order_relaxed);
}

}  // namespace ipuflow
