#include "optimizers/adam.h"

#include "absl/strings/str_cat.h"
#include "ops/array/const.h"
#include "ops/state/apply_adam.h"
#include "optimizers/step_counter.h"

namespace ipuflow::optimizers {

std::vector<Node*> AdamOptimizer::Prepare(const Scope& scope) {
  // torch.optim.Adam's ranges (AdamW and Lamb share them).
  if (!OptionRules(absl::StrCat(name(), " optimizer"))
           .Decay("beta1", beta1_)
           .Decay("beta2", beta2_)
           .NonNegative("epsilon", epsilon_)
           .NonNegative("weight_decay", weight_decay_)
           .Record(scope)) {
    return {};
  }
  lr_ = learning_rate_.ToOutput(scope.WithOpName("learning_rate"),
                                absl::StrCat(name(), " optimizer"),
                                "learning_rate");
  b1_ = ops::Const(scope.WithOpName("beta1"), beta1_);
  b2_ = ops::Const(scope.WithOpName("beta2"), beta2_);
  eps_ = ops::Const(scope.WithOpName("epsilon"), epsilon_);
  const internal::StepCounter step = internal::AddStepCounter(scope);
  step_ = step.value;
  return {step.increment};
}

Node* AdamOptimizer::ApplyDense(const Scope& scope, Output grad,
                                const ops::VariableInfo& var,
                                const std::vector<Output>& slots) {
  return ops::ApplyAdam(scope, Output(var.node), slots[0], slots[1], lr_, grad,
                        b1_, b2_, eps_, step_, weight_decay_, update_shard());
}

}  // namespace ipuflow::optimizers
