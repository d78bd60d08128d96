#include "optimizers/rms_prop.h"

#include "absl/strings/str_cat.h"
#include "ops/array/const.h"
#include "ops/state/apply_rms_prop.h"

namespace ipuflow::optimizers {

std::vector<Node*> RMSPropOptimizer::Prepare(const Scope& scope) {
  // torch.optim.RMSprop's ranges; rho is a moving-average decay.
  if (!OptionRules(absl::StrCat(name(), " optimizer"))
           .Between("rho", rho_, 0, 1)
           .NonNegative("momentum", momentum_)
           .NonNegative("epsilon", epsilon_)
           .Record(scope)) {
    return {};
  }
  lr_ = learning_rate_.ToOutput(scope.WithOpName("learning_rate"),
                                absl::StrCat(name(), " optimizer"),
                                "learning_rate");
  rho_t_ = ops::Const(scope.WithOpName("rho"), rho_);
  mu_t_ = ops::Const(scope.WithOpName("momentum"), momentum_);
  eps_t_ = ops::Const(scope.WithOpName("epsilon"), epsilon_);
  return {};
}

Node* RMSPropOptimizer::ApplyDense(const Scope& scope, Output grad,
                                   const ops::VariableInfo& var,
                                   const std::vector<Output>& slots) {
  return ops::ApplyRMSProp(scope, Output(var.node), slots[0], slots[1], lr_,
                           rho_t_, mu_t_, eps_t_, grad, update_shard());
}

std::vector<Node*> AdagradOptimizer::Prepare(const Scope& scope) {
  // torch.optim.Adagrad's ranges.
  if (!OptionRules(absl::StrCat(name(), " optimizer"))
           .NonNegative("initial_accumulator_value", initial_)
           .NonNegative("epsilon", epsilon_)
           .Record(scope)) {
    return {};
  }
  lr_ = learning_rate_.ToOutput(scope.WithOpName("learning_rate"),
                                absl::StrCat(name(), " optimizer"),
                                "learning_rate");
  eps_t_ = ops::Const(scope.WithOpName("epsilon"), epsilon_);
  return {};
}

Node* AdagradOptimizer::ApplyDense(const Scope& scope, Output grad,
                                   const ops::VariableInfo& var,
                                   const std::vector<Output>& slots) {
  return ops::ApplyAdagrad(scope, Output(var.node), slots[0], lr_, eps_t_, grad,
                           initial_, update_shard());
}

}  // namespace ipuflow::optimizers
