#include "ops/array/recomputation_checkpoint.h"

#include "ops/array/identity.h"

namespace ipuflow::ops {
namespace {

[[maybe_unused]] const OpRegistration kRecomputationCheckpoint =
    RegisterForwardingOp("RecomputationCheckpoint");

}  // namespace

Output RecomputationCheckpoint(const Scope& scope, Output x) {
  return scope.AddNode("RecomputationCheckpoint", {x});
}

}  // namespace ipuflow::ops
