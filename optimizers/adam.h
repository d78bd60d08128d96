// AdamOptimizer: Adam (Kingma & Ba), with bias correction; formulas in
// ops/state/apply_adam.h. Defaults are TensorFlow/Keras's: beta1 = 0.9,
// beta2 = 0.999, epsilon = 1e-7 (PyTorch's is 1e-8; AdamWOptimizer uses
// that). Note epsilon is added to sqrt(v_hat), as in the paper's Algorithm 1
// and PyTorch, not to sqrt(v) as TensorFlow does.
//
//   optimizers::AdamOptimizer adam(/*lr=*/1e-3f);
//   Node* train = adam.Minimize(scope, loss);
//
// Each variable gets slots "<var>/Adam/m" and "<var>/Adam/v"; each
// ApplyGradients adds a step counter "Adam/step" (float32, non-trainable,
// counting from 1 at the first update; exact up to 2^24 steps, after which
// the bias corrections are 1 in float32 anyway).
//
// Thread safety: as Optimizer.
#ifndef IPUFLOW_OPTIMIZERS_ADAM_H_
#define IPUFLOW_OPTIMIZERS_ADAM_H_

#include <string>
#include <utility>

#include "optimizers/optimizer.h"

namespace ipuflow::optimizers {

class AdamOptimizer : public Optimizer {
 public:
  explicit AdamOptimizer(Hyperparameter learning_rate, float beta1 = 0.9f,
                         float beta2 = 0.999f, float epsilon = 1e-7f)
      : AdamOptimizer("Adam", learning_rate, beta1, beta2, epsilon, 0) {}

  // Each element's update reads only that element: shardable.
  bool UpdatesElementwise() const override { return true; }

 protected:
  AdamOptimizer(std::string name, Hyperparameter learning_rate, float beta1,
                float beta2, float epsilon, float weight_decay)
      : Optimizer(std::move(name)),
        learning_rate_(learning_rate),
        beta1_(beta1),
        beta2_(beta2),
        epsilon_(epsilon),
        weight_decay_(weight_decay) {}

  std::vector<std::string> SlotNames() const override { return {"m", "v"}; }
  std::vector<Node*> Prepare(const Scope& scope) override;
  Node* ApplyDense(const Scope& scope, Output grad,
                   const ops::VariableInfo& var,
                   const std::vector<Output>& slots) override;

  const Hyperparameter learning_rate_;
  const float beta1_, beta2_, epsilon_, weight_decay_;
  // Built by the current ApplyGradients.
  Output lr_, b1_, b2_, eps_, step_;
};

}  // namespace ipuflow::optimizers

#endif  // IPUFLOW_OPTIMIZERS_ADAM_H_
