#include "optimizers/gradient_descent.h"

#include "absl/strings/str_cat.h"
#include "ops/state/apply_gradient_descent.h"

namespace ipuflow::optimizers {

std::vector<Node*> GradientDescentOptimizer::Prepare(const Scope& scope) {
  lr_ = learning_rate_.ToOutput(scope.WithOpName("learning_rate"),
                                absl::StrCat(name(), " optimizer"),
                                "learning_rate");
  return {};
}

Node* GradientDescentOptimizer::ApplyDense(const Scope& scope, Output grad,
                                           const ops::VariableInfo& var,
                                           const std::vector<Output>& slots) {
  return ops::ApplyGradientDescent(scope, Output(var.node), lr_, grad,
                                   update_shard());
}

}  // namespace ipuflow::optimizers
