#include "ops/collective/replica_index.h"

#include "core/ipu/collective_group.h"
#include "core/kernel.h"
#include "core/op_registry.h"

namespace ipuflow::ops {
namespace {

REGISTER_OP("ReplicaIndex")
    .SetReplicaIdentity(ReplicaIdentity::kDiffers)
    .SetShapeFn([](ShapeContext& c) {
      c.set_output(0, DType::kInt32, TensorShape());
      return absl::OkStatus();
    })
    .SetKernel([](KernelContext& ctx) {
      ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, TensorShape()));
      // Global across processes (docs/DISTRIBUTED.md).
      *out->data<int32_t>() = ctx.global_replica();
      return absl::OkStatus();
    })
    .NotDifferentiable("an integer with no inputs");

}  // namespace

Output ReplicaIndex(const Scope& scope) {
  return scope.AddNode("ReplicaIndex", {});
}

}  // namespace ipuflow::ops
