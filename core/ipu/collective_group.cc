#include "core/ipu/collective_group.h"

#include "absl/strings/str_cat.h"

namespace ipuflow {

template <typename T>
void CollectiveGroup::ReduceChunk(const Rendezvous& r, int64_t begin,
                                  int64_t end, ReduceOp op) const {
  using Arr = Eigen::Array<T, Eigen::Dynamic, 1>;
  const int64_t n = end - begin;
  Arr acc = Eigen::Map<const Arr>(r.inputs[0]->data<T>() + begin, n);
  for (int k = 1; k < num_replicas_; ++k) {
    acc += Eigen::Map<const Arr>(r.inputs[k]->data<T>() + begin, n);
  }
  if (op == ReduceOp::kMean) acc /= static_cast<T>(num_replicas_);
  for (int k = 0; k < num_replicas_; ++k) {
    Eigen::Map<Arr>(r.outputs[k]->data<T>() + begin, n) = acc;
  }
}

absl::Status CollectiveGroup::Barrier(Rendezvous* r, bool cancellable) {
  if (cancellable && !cancelled_.ok()) return cancelled_;
  const uint64_t gen = r->generation;
  if (++r->arrived == num_replicas_) {
    r->arrived = 0;
    ++r->generation;
    cv_.SignalAll();
    return absl::OkStatus();
  }
  cv_.Await(&mu_, [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return r->generation != gen || (cancellable && !cancelled_.ok());
  });
  return r->generation != gen ? absl::OkStatus() : cancelled_;
}

absl::Status CollectiveGroup::AllReduce(int replica, const std::string& key,
                                        const Tensor& in, const Tensor& out,
                                        ReduceOp op) {
  if (in.dtype() != out.dtype() || in.shape() != out.shape()) {
    return absl::InvalidArgumentError("AllReduce: output differs from input");
  }
  if (in.dtype() != DType::kFloat32 && in.dtype() != DType::kFloat16 &&
      in.dtype() != DType::kInt32 && in.dtype() != DType::kInt64) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cross-replica reduction of ", DTypeName(in.dtype()), " is not supported"));
  }
  if (num_replicas_ == 1) {
    out.CopyFrom(in);
    return absl::OkStatus();
  }
  Rendezvous* r;
  // Phase 1: publish this replica's buffers. A local copy of the input
  // lets `out` alias `in` (chunks are written while others still read).
  Tensor local = in.Copy();
  {
    MutexLock l(&mu_);
    auto& slot = rendezvous_[key];
    if (!slot) {
      slot = std::make_unique<Rendezvous>();
      slot->inputs.resize(num_replicas_);
      slot->outputs.resize(num_replicas_);
    }
    r = slot.get();
    r->inputs[replica] = &local;
    r->outputs[replica] = &out;
    RETURN_IF_ERROR(Barrier(r, /*cancellable=*/true));
  }
  // Phase 2: reduce chunk `replica` across all inputs, write it everywhere.
  const int64_t n = in.NumElements();
  const int64_t chunk = (n + num_replicas_ - 1) / num_replicas_;
  const int64_t begin = std::min(n, chunk * replica);
  const int64_t end = std::min(n, begin + chunk);
  if (end > begin) {
    IPUFLOW_SWITCH_NUMERIC(in.dtype(), ReduceChunk<T>(*r, begin, end, op),
                           break);
  }
  bytes_sent_[replica].fetch_add(
      2 * (num_replicas_ - 1) * static_cast<int64_t>(in.TotalBytes()) / num_replicas_,
      std::memory_order_relaxed);
  // Phase 3: nobody leaves (freeing `local`) until every chunk is written.
  // Not cancellable: leaving on Cancel() would free `local` while others
  // still read it. Every replica passed phase 1 and phase 2 never blocks, so
  // all of them get here.
  MutexLock l(&mu_);
  return Barrier(r, /*cancellable=*/false);
}

void CollectiveGroup::Cancel(absl::Status reason) {
  MutexLock l(&mu_);
  if (cancelled_.ok()) cancelled_ = std::move(reason);
  cv_.SignalAll();
}

void CollectiveGroup::Reset() {
  MutexLock l(&mu_);
  cancelled_ = absl::OkStatus();
  for (auto& [key, r] : rendezvous_) r->arrived = 0;
  for (auto& b : bytes_sent_) b.store(0, std::memory_order_relaxed);
}

int64_t CollectiveGroup::bytes_sent(int replica) const {
  return bytes_sent_[replica].load(std::memory_order_relaxed);
}

}  // namespace ipuflow
