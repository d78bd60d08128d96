// CrossReplicaOptimizer: data parallelism for any optimizer. Each replica
// computes gradients on its own data; before the inner optimizer applies
// them, every gradient is reduced over the replicas, so all replicas apply
// the same update and their weights stay bitwise equal (TensorFlow IPU guide
// 6.4.2, "Performing parameter updates").
//
// Tensor fusion (Horovod's, "Tensor Fusion" in its docs): small gradients
// of one IPU and dtype are flattened, concatenated into buckets of at most
// `fusion_threshold_bytes` and reduced by one all-reduce per bucket, then
// cut back; a gradient over half the threshold is reduced alone (its copies
// would cost more than the rendezvous saved). Each element is summed over
// the replicas in rank order either way, so fusion changes no bit of the
// result, only the number of collectives (one rendezvous each, and across
// processes one message chain each). 0 turns it off.
//
//   optimizers::AdamOptimizer adam(1e-3f);
//   optimizers::CrossReplicaOptimizer opt(&adam);   // mean over replicas
//   Node* train = opt.Minimize(scope, loss);
//
// Outside a replicated program (one replica) the reduction is the identity.
// The inner optimizer builds its update exactly as without the wrapper: its
// slots keep their names ("w/Adam/m"), so checkpoints do not depend on the
// wrapper.
//
// Reduction over replicas (R replicas, g_r replica r's gradient):
//   kMean (the original's only mode): G = (1/R) sum_r g_r
//   kSum:                             G = sum_r g_r
// Wrapped in a GradientAccumulationOptimizer, the reduction runs once per
// weight update on the accumulated gradient:
// CrossReplicaGradientAccumulationOptimizerV2 (gradient_accumulation.h).
// A pipeline's optimizer_function returns it to average the accumulated
// gradients of replicated pipelines once per pipeline run.
// Its optimizer state is replica-identical, so it may be sharded over the
// replicas: in a pipeline (PipelineOptions::replicated_optimizer_state_
// sharding), and in a device loop through
// CrossReplicaGradientAccumulationOptimizerV2's WeightUpdateOptions
// (num_mini_batches 1 updates every step), where the update itself is
// sharded too: given an update shard (Optimizer::set_update_shard) the
// all-reduce becomes a reduce-scatter (ZeRO-1, gradient_accumulation.h).
//
// Thread safety: as Optimizer.
#ifndef IPUFLOW_OPTIMIZERS_CROSS_REPLICA_H_
#define IPUFLOW_OPTIMIZERS_CROSS_REPLICA_H_

#include <memory>

#include "optimizers/optimizer.h"

namespace ipuflow::optimizers {

// How gradients are combined over the replicas.
enum class ReplicaReduction { kMean, kSum };
const char* ReplicaReductionName(ReplicaReduction r);

class CrossReplicaOptimizer : public Optimizer {
 public:
  // `optimizer` is not owned and must outlive this.
  static constexpr int64_t kDefaultFusionThresholdBytes = int64_t{1} << 20;

  explicit CrossReplicaOptimizer(
      Optimizer* optimizer,
      ReplicaReduction reduction = ReplicaReduction::kMean,
      int64_t fusion_threshold_bytes = kDefaultFusionThresholdBytes)
      : Optimizer("CrossReplica"),
        optimizer_(optimizer),
        reduction_(reduction),
        fusion_threshold_bytes_(fusion_threshold_bytes) {}
  // Owns `optimizer` (for pipelines' optimizer_function, which returns a
  // shared_ptr).
  explicit CrossReplicaOptimizer(
      std::shared_ptr<Optimizer> optimizer,
      ReplicaReduction reduction = ReplicaReduction::kMean,
      int64_t fusion_threshold_bytes = kDefaultFusionThresholdBytes)
      : Optimizer("CrossReplica"),
        owned_(std::move(optimizer)),
        optimizer_(owned_.get()),
        reduction_(reduction),
        fusion_threshold_bytes_(fusion_threshold_bytes) {}

  bool accumulates_gradients() const override {
    return optimizer_ != nullptr && optimizer_->accumulates_gradients();
  }
  ReplicaReduction reduction() const { return reduction_; }
  int64_t fusion_threshold_bytes() const { return fusion_threshold_bytes_; }
  Optimizer* inner() const { return optimizer_; }
  bool UpdatesElementwise() const override {
    return optimizer_ != nullptr && optimizer_->UpdatesElementwise();
  }
  // The inner optimizer's (the reduction keeps the dtype).
  DType GradientDType(const ops::VariableInfo& var) const override {
    return optimizer_ != nullptr ? optimizer_->GradientDType(var) : var.dtype;
  }

  // Reduces every gradient over the replicas ("CrossReplica/<var>/mean" or
  // ".../sum", on the variable's IPU; fused: "CrossReplica/<first var>/
  // fused_mean/all"), then the inner ApplyGradients. With
  // an update shard (set_update_shard) the reduction is a reduce-scatter
  // into that chunk (ops/collective/sharded_update.h) and the inner
  // optimizer updates that chunk only.
  Node* ApplyGradients(const Scope& scope,
                       const std::vector<GradAndVar>& grads_and_vars) override;

 protected:
  // Not used: ApplyGradients hands the reduced gradients to the inner
  // optimizer, which builds its own Prepare and ApplyDense.
  std::vector<Node*> Prepare(const Scope& scope) override { return {}; }
  Node* ApplyDense(const Scope& scope, Output grad,
                   const ops::VariableInfo& var,
                   const std::vector<Output>& slots) override;

 private:
  std::shared_ptr<Optimizer> owned_;
  Optimizer* const optimizer_;
  const ReplicaReduction reduction_;
  const int64_t fusion_threshold_bytes_;
};

}  // namespace ipuflow::optimizers

#endif  // IPUFLOW_OPTIMIZERS_CROSS_REPLICA_H_
