#include "optimizers/sgd.h"

#include "absl/strings/str_cat.h"
#include "ops/array/const.h"
#include "ops/state/apply_sgd.h"
#include "optimizers/step_counter.h"

namespace ipuflow::optimizers {

std::vector<Node*> SGDOptimizer::Prepare(const Scope& scope) {
  const SGDOptions& o = options_;
  OptionRules rules(absl::StrCat(name(), " optimizer"));
  // torch.optim.SGD refuses a negative momentum or weight decay, and
  // Nesterov without momentum or with dampening; a dampening outside
  // [0, 1] would scale the gradient up or flip its sign.
  rules.NonNegative("momentum", o.momentum)
      .Between("dampening", o.dampening, 0, 1)
      .NonNegative("weight_decay", o.weight_decay);
  if (o.nesterov && !(o.momentum > 0 && o.dampening == 0)) {
    rules.Fail(absl::StrCat(
        "nesterov is true: Nesterov momentum requires a momentum > 0 and "
        "zero dampening (got momentum ",
        o.momentum, ", dampening ", o.dampening, ")"));
  }
  if (!rules.Record(scope)) return {};
  lr_ = learning_rate_.ToOutput(scope.WithOpName("learning_rate"),
                                absl::StrCat(name(), " optimizer"),
                                "learning_rate");
  mu_ = ops::Const(scope.WithOpName("momentum"), options_.momentum);
  damp_ = ops::Const(scope.WithOpName("dampening"), options_.dampening);
  wd_ = ops::Const(scope.WithOpName("weight_decay"), options_.weight_decay);
  const internal::StepCounter step = internal::AddStepCounter(scope);
  step_ = step.value;
  return {step.increment};
}

Node* SGDOptimizer::ApplyDense(const Scope& scope, Output grad,
                               const ops::VariableInfo& var,
                               const std::vector<Output>& slots) {
  return ops::ApplySGD(scope, Output(var.node), slots[0], lr_, mu_, damp_, wd_,
                       step_, grad, options_.nesterov, update_shard());
}

}  // namespace ipuflow::optimizers
