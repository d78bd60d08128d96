// MomentumOptimizer: SGD with momentum, plain or Nesterov
// (ops/state/apply_momentum.h has the formulas; they are TensorFlow's
// MomentumOptimizer and PyTorch's SGD with dampening 0). Each variable gets
// a slot "<var>/Momentum/accum", zero-initialised.
//
//   optimizers::MomentumOptimizer opt(/*lr=*/0.1f, /*momentum=*/0.9f,
//                                     /*use_nesterov=*/true);
//   Node* train = opt.Minimize(scope, loss);
//
// Thread safety: as Optimizer.
#ifndef IPUFLOW_OPTIMIZERS_MOMENTUM_H_
#define IPUFLOW_OPTIMIZERS_MOMENTUM_H_

#include "optimizers/optimizer.h"

namespace ipuflow::optimizers {

class MomentumOptimizer : public Optimizer {
 public:
  MomentumOptimizer(Hyperparameter learning_rate, Hyperparameter momentum,
                    bool use_nesterov = false)
      : Optimizer("Momentum"),
        learning_rate_(learning_rate),
        momentum_(momentum),
        use_nesterov_(use_nesterov) {}

  // Each element's update reads only that element: shardable.
  bool UpdatesElementwise() const override { return true; }

 protected:
  std::vector<std::string> SlotNames() const override { return {"accum"}; }
  std::vector<Node*> Prepare(const Scope& scope) override;
  Node* ApplyDense(const Scope& scope, Output grad,
                   const ops::VariableInfo& var,
                   const std::vector<Output>& slots) override;

 private:
  const Hyperparameter learning_rate_;
  const Hyperparameter momentum_;
  const bool use_nesterov_;
  Output lr_, mu_;  // Built by the current ApplyGradients.
};

}  // namespace ipuflow::optimizers

#endif  // IPUFLOW_OPTIMIZERS_MOMENTUM_H_
