#include "optimizers/step_counter.h"

#include "ops/array/const.h"
#include "ops/state/assign.h"
#include "ops/state/read_variable.h"
#include "ops/state/variable.h"

namespace ipuflow::optimizers::internal {

StepCounter AddStepCounter(const Scope& scope) {
  ops::VariableHandle step =
      ops::Variable(scope.WithOpName("step"),
                    ops::Const(scope.WithOpName("step/initial_value"), 0.f),
                    {/*shared_name=*/"", /*trainable=*/false});
  StepCounter c;
  c.increment = ops::AssignAdd(scope.WithOpName("step/increment"), step.handle,
                               ops::Const(scope.WithOpName("step/one"), 1.f));
  // Built after the increment, so it reads the incremented count.
  c.value = ops::ReadVariable(scope.WithOpName("step/value"), step.handle);
  return c;
}

}  // namespace ipuflow::optimizers::internal
