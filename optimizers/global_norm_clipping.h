// Gradient clipping by global norm, as TensorFlow's clip_by_global_norm
// (and PyTorch's clip_grad_norm_ with norm 2): every gradient t_i becomes
// t_i * clip_norm / max(global_norm, clip_norm), global_norm =
// sqrt(sum_i ||t_i||^2) summed in float32 (float16 gradients are widened
// for the norm, then scaled in their dtype).
//
// Replicated: wrap the clipping optimizer in a CrossReplicaOptimizer, so
// the gradients are averaged over the replicas first and every replica
// clips by the norm of the same mean gradient:
//
//   optimizers::SGDOptimizer sgd(0.1f);
//   optimizers::GlobalNormClippingOptimizer clip(&sgd, /*clip_norm=*/1.0f);
//   optimizers::CrossReplicaOptimizer opt(&clip);
//   Node* train = opt.Minimize(scope, loss);
//
// When each replica holds a different part of the gradients (a sharded
// update, or gradients you will not average), sum_over_replicas adds the
// replicas' sums of squares (a CrossReplicaSum over `replica_groups`) so the
// norm is that of all the parts together.
//
// Thread safety: as Optimizer.
#ifndef IPUFLOW_OPTIMIZERS_GLOBAL_NORM_CLIPPING_H_
#define IPUFLOW_OPTIMIZERS_GLOBAL_NORM_CLIPPING_H_

#include <vector>

#include "core/ipu/collective_group.h"
#include "optimizers/optimizer.h"

namespace ipuflow::optimizers {

struct ClipOptions {
  bool sum_over_replicas = false;
  ReplicaGroups replica_groups = ReplicaGroups::All();
};

struct ClippedGradients {
  std::vector<Output> gradients;  // Invalid entries stay invalid.
  Output global_norm;             // float32 scalar, before clipping.
};

// clip_norm must be finite and > 0 (else an error in the scope).
ClippedGradients ClipByGlobalNorm(const Scope& scope,
                                  const std::vector<Output>& gradients,
                                  float clip_norm,
                                  const ClipOptions& options = {});

class GlobalNormClippingOptimizer : public Optimizer {
 public:
  // `optimizer` is not owned and must outlive this.
  GlobalNormClippingOptimizer(Optimizer* optimizer, float clip_norm,
                              const ClipOptions& options = {})
      : Optimizer("GlobalNormClipping"),
        optimizer_(optimizer),
        clip_norm_(clip_norm),
        options_(options) {}

  bool accumulates_gradients() const override {
    return optimizer_ != nullptr && optimizer_->accumulates_gradients();
  }
  // The norm needs every element: not shardable unless the squares are
  // summed over the replicas.
  bool UpdatesElementwise() const override {
    return options_.sum_over_replicas && optimizer_ != nullptr &&
           optimizer_->UpdatesElementwise();
  }
  DType GradientDType(const ops::VariableInfo& var) const override {
    return optimizer_ != nullptr ? optimizer_->GradientDType(var) : var.dtype;
  }

  // Clips (ClipByGlobalNorm over every valid gradient), then the inner
  // ApplyGradients.
  Node* ApplyGradients(const Scope& scope,
                       const std::vector<GradAndVar>& grads_and_vars) override;
  // The global norm of the last ApplyGradients (for monitoring).
  Output global_norm() const { return global_norm_; }

 protected:
  std::vector<Node*> Prepare(const Scope&) override { return {}; }
  Node* ApplyDense(const Scope& scope, Output grad,
                   const ops::VariableInfo& var,
                   const std::vector<Output>& slots) override;

 private:
  Optimizer* optimizer_;
  const float clip_norm_;
  const ClipOptions options_;
  Output global_norm_;
};

}  // namespace ipuflow::optimizers

#endif  // IPUFLOW_OPTIMIZERS_GLOBAL_NORM_CLIPPING_H_
