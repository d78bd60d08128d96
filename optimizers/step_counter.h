// The step counter an optimizer's updates share (Adam's bias correction,
// SGD's first-step momentum): a non-trainable float32 variable "step" in
// the optimizer's scope, 0 at first, incremented once per ApplyGradients.
// Private to optimizers/ (built in an Optimizer::Prepare).
#ifndef IPUFLOW_OPTIMIZERS_STEP_COUNTER_H_
#define IPUFLOW_OPTIMIZERS_STEP_COUNTER_H_

#include "core/graph.h"
#include "core/scope.h"

namespace ipuflow::optimizers::internal {

struct StepCounter {
  Node* increment = nullptr;  // For the update group to run.
  Output value;               // Read after the increment: 1 at the first.
};

StepCounter AddStepCounter(const Scope& scope);

}  // namespace ipuflow::optimizers::internal

#endif  // IPUFLOW_OPTIMIZERS_STEP_COUNTER_H_
