#include "ops/collective/cross_replica.h"

#include "core/kernel.h"
#include "core/op_registry.h"
#include "ops/collective/replica_groups_attr.h"
#include "ops/shape_fns.h"

namespace ipuflow::ops {
namespace {

absl::Status AllReduceKernel(KernelContext& ctx, CollectiveGroup::ReduceOp op) {
  const Tensor& x = ctx.input(0);
  ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, x.shape()));
  return RunCollective(ctx, [&](CollectiveGroup& group, int replica,
                                const ReplicaGroups& groups) {
    return group.AllReduce(replica, ctx.node().name(), x, *out, op, groups);
  });
}

absl::Status NumericShape(ShapeContext& c) {
  RETURN_IF_ERROR(CheckNumericInput(c, "reduced"));
  RETURN_IF_ERROR(CheckGroupAttrs(c));
  return shape_fns::Unchanged(c);
}

REGISTER_OP("CrossReplicaSum")
    .Input("x")
    .Attr("replica_group_size", int64_t{0})  // 0: all replicas.
    .Attr("replica_group_type", "consecutive")
    .SetStateful()  // A collective: every replica must run it.
    .SetReplicaIdentity(AllReplicasIdentical)
    .SetShapeFn(NumericShape)
    .SetKernel([](KernelContext& ctx) {
      return AllReduceKernel(ctx, CollectiveGroup::ReduceOp::kSum);
    })
    // y_r = sum_{k in group(r)} x_k;  dL/dx_r = sum_{k in group(r)} dL/dy_k
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      dx->push_back(CrossReplicaSum(s, dy[0], GroupsOf(op.attrs())));
      return absl::OkStatus();
    });

REGISTER_OP("CrossReplicaMean")
    .Input("x")
    .Attr("replica_group_size", int64_t{0})
    .Attr("replica_group_type", "consecutive")
    .SetStateful()
    .SetReplicaIdentity(AllReplicasIdentical)
    .SetShapeFn(NumericShape)
    .SetKernel([](KernelContext& ctx) {
      return AllReduceKernel(ctx, CollectiveGroup::ReduceOp::kMean);
    })
    // y_r = mean_{k in group(r)} x_k;  dL/dx_r = mean_{k in group(r)} dL/dy_k
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      dx->push_back(CrossReplicaMean(s, dy[0], GroupsOf(op.attrs())));
      return absl::OkStatus();
    });

}  // namespace

Output CrossReplicaSum(const Scope& scope, Output x,
                       const ReplicaGroups& groups) {
  return scope.AddNode("CrossReplicaSum", {x}, WithGroupAttrs(groups));
}

Output CrossReplicaMean(const Scope& scope, Output x,
                        const ReplicaGroups& groups) {
  return scope.AddNode("CrossReplicaMean", {x}, WithGroupAttrs(groups));
}

}  // namespace ipuflow::ops
