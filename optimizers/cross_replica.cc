#include "optimizers/cross_replica.h"

#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "ops/array/concat.h"
#include "ops/array/reshape.h"
#include "ops/collective/cross_replica.h"
#include "ops/collective/sharded_update.h"

namespace ipuflow::optimizers {

const char* ReplicaReductionName(ReplicaReduction r) {
  return r == ReplicaReduction::kMean ? "mean" : "sum";
}

Node* CrossReplicaOptimizer::ApplyGradients(
    const Scope& scope, const std::vector<GradAndVar>& grads_and_vars) {
  if (!scope.ok()) return nullptr;
  if (optimizer_ == nullptr) {
    scope.UpdateStatus(absl::InvalidArgumentError(
        "CrossReplica optimizer: the optimizer to wrap is null"));
    return nullptr;
  }
  const Scope s = scope.NewSubScope(name());
  const bool mean = reduction_ == ReplicaReduction::kMean;
  auto reduce = [&](const Scope& vs, Output x) {
    return mean ? ops::CrossReplicaMean(vs, x) : ops::CrossReplicaSum(vs, x);
  };
  // One collective per gradient; its node name is the rendezvous key, so
  // the replicas meet on the same tensor whatever order they reach it in.
  auto own_scope = [&](const GradAndVar& gv) {
    return s.WithIpu(gv.variable->ipu())
        .WithOpName(absl::StrCat(gv.variable->name(), "/",
                                 ReplicaReductionName(reduction_)));
  };
  std::vector<GradAndVar> reduced = grads_and_vars;
  // Fusion buckets: gradients on one IPU, of one dtype, packed in order
  // while the bucket stays within the threshold.
  struct Bucket {
    std::vector<size_t> members;
    int64_t bytes = 0;
  };
  std::map<std::pair<int, DType>, Bucket> open;
  std::vector<Bucket> buckets;
  for (size_t i = 0; i < grads_and_vars.size(); ++i) {
    const GradAndVar& gv = grads_and_vars[i];
    if (!gv.grad.valid() || gv.variable == nullptr) continue;
    const Scope vs = own_scope(gv);
    const Output shard = UpdateShardOf(gv.variable);
    if (shard.valid()) {
      reduced[i].grad = mean ? ops::ShardedCrossReplicaMean(vs, gv.grad, shard)
                             : ops::ShardedCrossReplicaSum(vs, gv.grad, shard);
      continue;
    }
    const TensorShape& shape = gv.grad.shape();
    const int64_t bytes =
        shape.IsFullyDefined()
            ? shape.num_elements() * int64_t(DTypeSize(gv.grad.dtype()))
            : -1;
    if (bytes < 0 || fusion_threshold_bytes_ <= 0 ||
        bytes > fusion_threshold_bytes_ / 2) {
      reduced[i].grad = reduce(vs, gv.grad);  // Alone: no copies.
      continue;
    }
    Bucket& b = open[{gv.variable->ipu(), gv.grad.dtype()}];
    if (b.bytes + bytes > fusion_threshold_bytes_) {
      buckets.push_back(std::move(b));
      b = Bucket();
    }
    b.members.push_back(i);
    b.bytes += bytes;
  }
  for (auto& [key, b] : open) buckets.push_back(std::move(b));
  for (const Bucket& b : buckets) {
    const GradAndVar& first = grads_and_vars[b.members[0]];
    if (b.members.size() == 1) {
      reduced[b.members[0]].grad = reduce(own_scope(first), first.grad);
      continue;
    }
    // Flat, concatenated, reduced once, cut back: the same sums element by
    // element as one collective each (rank order), one rendezvous instead
    // of many (Horovod's "tensor fusion").
    const Scope fs =
        s.WithIpu(first.variable->ipu())
            .NewSubScope(absl::StrCat(first.variable->name(), "/fused_",
                                      ReplicaReductionName(reduction_)));
    std::vector<Output> flat;
    for (size_t i : b.members) {
      flat.push_back(
          ops::Reshape(fs, grads_and_vars[i].grad, TensorShape({-1})));
    }
    const Output all = reduce(fs.WithOpName("all"), ops::Concat(fs, flat, 0));
    const std::vector<Output> pieces = ops::ConcatGrad(fs, all, flat, 0);
    for (size_t k = 0; k < b.members.size(); ++k) {
      GradAndVar& r = reduced[b.members[k]];
      r.grad = ops::Reshape(fs, pieces[k], r.grad.shape());
    }
  }
  if (!scope.ok()) return nullptr;
  optimizer_->set_update_shard(update_shard());
  optimizer_->set_update_shards(update_shards());
  Node* applied = optimizer_->ApplyGradients(scope, reduced);
  optimizer_->set_update_shard(Output());
  optimizer_->set_update_shards({});
  return applied;
}

Node* CrossReplicaOptimizer::ApplyDense(const Scope& scope, Output,
                                        const ops::VariableInfo& var,
                                        const std::vector<Output>&) {
  scope.UpdateStatus(absl::InternalError(
      absl::StrCat("CrossReplica optimizer: ApplyDense called for '", var.name,
                   "' (the wrapper applies through its inner optimizer)")));
  return nullptr;
}

}  // namespace ipuflow::optimizers
