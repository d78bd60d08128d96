#include "optimizers/momentum.h"

#include "absl/strings/str_cat.h"
#include "ops/state/apply_momentum.h"

namespace ipuflow::optimizers {

std::vector<Node*> MomentumOptimizer::Prepare(const Scope& scope) {
  lr_ = learning_rate_.ToOutput(scope.WithOpName("learning_rate"),
                                absl::StrCat(name(), " optimizer"),
                                "learning_rate");
  mu_ = momentum_.ToOutput(scope.WithOpName("momentum"),
                           absl::StrCat(name(), " optimizer"), "momentum");
  return {};
}

Node* MomentumOptimizer::ApplyDense(const Scope& scope, Output grad,
                                    const ops::VariableInfo& var,
                                    const std::vector<Output>& slots) {
  return ops::ApplyMomentum(scope, Output(var.node), slots[0], lr_, grad, mu_,
                            use_nesterov_, update_shard());
}

}  // namespace ipuflow::optimizers
