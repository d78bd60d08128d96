// GradientDescentOptimizer: var -= lr * grad
// (ops/state/apply_gradient_descent.h).
//
//   optimizers::GradientDescentOptimizer sgd(0.01f);
//   Node* train = sgd.Minimize(scope, loss);
//
//   Output lr = ops::Placeholder(scope, DType::kFloat32, {});   // a schedule
//   optimizers::GradientDescentOptimizer scheduled(lr);
//
// Thread safety: as Optimizer.
#ifndef IPUFLOW_OPTIMIZERS_GRADIENT_DESCENT_H_
#define IPUFLOW_OPTIMIZERS_GRADIENT_DESCENT_H_

#include "optimizers/optimizer.h"

namespace ipuflow::optimizers {

class GradientDescentOptimizer : public Optimizer {
 public:
  explicit GradientDescentOptimizer(Hyperparameter learning_rate)
      : Optimizer("GradientDescent"), learning_rate_(learning_rate) {}

  // Each element's update reads only that element: shardable.
  bool UpdatesElementwise() const override { return true; }

 protected:
  std::vector<Node*> Prepare(const Scope& scope) override;
  Node* ApplyDense(const Scope& scope, Output grad,
                   const ops::VariableInfo& var,
                   const std::vector<Output>& slots) override;

 private:
  const Hyperparameter learning_rate_;
  Output lr_;  // Built by the current ApplyGradients.
};

}  // namespace ipuflow::optimizers

#endif  // IPUFLOW_OPTIMIZERS_GRADIENT_DESCENT_H_
