// SGDOptimizer: PyTorch's torch.optim.SGD (ops/state/apply_sgd.h has the
// rule): momentum with dampening, L2 weight decay added to the gradient,
// Nesterov, and the momentum buffer set to the first step's gradient.
// GradientDescentOptimizer and MomentumOptimizer are TensorFlow's rules
// (no weight decay or dampening; their accumulator starts at zero). Slot
// "<var>/SGD/momentum_buffer"; a step counter "SGD/step" as Adam's.
//
//   optimizers::SGDOptimizer opt(0.1f, {.momentum = 0.9f,
//                                       .dampening = 0.1f,
//                                       .weight_decay = 1e-4f});
//   Node* train = opt.Minimize(scope, loss);
//
// Thread safety: as Optimizer.
#ifndef IPUFLOW_OPTIMIZERS_SGD_H_
#define IPUFLOW_OPTIMIZERS_SGD_H_

#include "optimizers/optimizer.h"

namespace ipuflow::optimizers {

struct SGDOptions {
  float momentum = 0.0f;
  float dampening = 0.0f;
  float weight_decay = 0.0f;
  bool nesterov = false;
};

class SGDOptimizer : public Optimizer {
 public:
  SGDOptimizer(Hyperparameter learning_rate, const SGDOptions& options = {})
      : Optimizer("SGD"), learning_rate_(learning_rate), options_(options) {}

  bool UpdatesElementwise() const override { return true; }

 protected:
  std::vector<std::string> SlotNames() const override {
    return {"momentum_buffer"};
  }
  std::vector<Node*> Prepare(const Scope& scope) override;
  Node* ApplyDense(const Scope& scope, Output grad,
                   const ops::VariableInfo& var,
                   const std::vector<Output>& slots) override;

 private:
  const Hyperparameter learning_rate_;
  const SGDOptions options_;
  Output lr_, mu_, damp_, wd_, step_;  // Built by the current ApplyGradients.
};

}  // namespace ipuflow::optimizers

#endif  // IPUFLOW_OPTIMIZERS_SGD_H_
