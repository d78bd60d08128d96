#include "optimizers/lamb.h"

#include "ops/state/apply_lamb.h"

namespace ipuflow::optimizers {

Node* LambOptimizer::ApplyDense(const Scope& scope, Output grad,
                                const ops::VariableInfo& var,
                                const std::vector<Output>& slots) {
  return ops::ApplyLamb(scope, Output(var.node), slots[0], slots[1], lr_, grad,
                        b1_, b2_, eps_, step_, weight_decay_);
}

}  // namespace ipuflow::optimizers
