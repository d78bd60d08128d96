// LambOptimizer: LAMB (You et al. 2019), Adam with a layer-wise trust ratio
// ||w|| / ||update|| for large-batch training; formulas in
// ops/state/apply_lamb.h. Defaults are TensorFlow Addons': beta1 = 0.9,
// beta2 = 0.999, epsilon = 1e-6, weight_decay = 0 (the decay, when set, is
// part of the update the trust ratio scales, as in the paper).
//
//   optimizers::LambOptimizer lamb(/*lr=*/1e-3f, /*weight_decay=*/0.01f);
//   Node* train = lamb.Minimize(scope, loss);
//
// Slots "<var>/Lamb/m" and "<var>/Lamb/v"; a step counter "Lamb/step".
//
// Thread safety: as Optimizer.
#ifndef IPUFLOW_OPTIMIZERS_LAMB_H_
#define IPUFLOW_OPTIMIZERS_LAMB_H_

#include "optimizers/adam.h"

namespace ipuflow::optimizers {

class LambOptimizer : public AdamOptimizer {
 public:
  explicit LambOptimizer(Hyperparameter learning_rate, float weight_decay = 0,
                         float beta1 = 0.9f, float beta2 = 0.999f,
                         float epsilon = 1e-6f)
      : AdamOptimizer("Lamb", learning_rate, beta1, beta2, epsilon,
                      weight_decay) {}

  // Its trust ratio needs the norms of the whole variable and update.
  bool UpdatesElementwise() const override { return false; }

 protected:
  Node* ApplyDense(const Scope& scope, Output grad,
                   const ops::VariableInfo& var,
                   const std::vector<Output>& slots) override;
};

}  // namespace ipuflow::optimizers

#endif  // IPUFLOW_OPTIMIZERS_LAMB_H_
