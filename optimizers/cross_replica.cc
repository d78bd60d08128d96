#include "optimizers/cross_replica.h"

#include "absl/strings/str_cat.h"
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
  std::vector<GradAndVar> reduced;
  for (const GradAndVar& gv : grads_and_vars) {
    if (!gv.grad.valid() || gv.variable == nullptr) {
      reduced.push_back(gv);
      continue;
    }
    // One collective per gradient; its node name is the rendezvous key, so
    // the replicas meet on the same tensor whatever order they reach it in.
    const Scope vs =
        s.WithIpu(gv.variable->ipu())
            .WithOpName(absl::StrCat(gv.variable->name(), "/",
                                     ReplicaReductionName(reduction_)));
    const Output shard = UpdateShardOf(gv.variable);
    const bool mean = reduction_ == ReplicaReduction::kMean;
    if (shard.valid()) {
      reduced.push_back({mean ? ops::ShardedCrossReplicaMean(vs, gv.grad, shard)
                              : ops::ShardedCrossReplicaSum(vs, gv.grad, shard),
                         gv.variable});
    } else {
      reduced.push_back({mean ? ops::CrossReplicaMean(vs, gv.grad)
                              : ops::CrossReplicaSum(vs, gv.grad),
                         gv.variable});
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
