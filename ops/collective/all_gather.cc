#include "ops/collective/all_gather.h"

#include "core/kernel.h"
#include "core/op_registry.h"
#include "ops/array/reshape.h"
#include "ops/collective/reduce_scatter.h"
#include "ops/collective/replica_groups_attr.h"

namespace ipuflow::ops {
namespace {

TensorShape Stacked(int64_t g, const TensorShape& x) {
  std::vector<int64_t> dims = {g};
  for (int i = 0; i < x.rank(); ++i) dims.push_back(x.dim(i));
  return TensorShape(dims);
}

REGISTER_OP("AllGather")
    .Input("x")
    .Attr("replica_group_size", int64_t{0})  // 0: all replicas.
    .Attr("replica_group_type", "consecutive")
    .SetStateful()  // A collective: every replica must run it.
    .SetReplicaIdentity(AllReplicasIdentical)
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      const DType t = c.input_dtype(0);
      RETURN_IF_ERROR(CheckNumericInput(c, "gathered"));
      RETURN_IF_ERROR(CheckGroupAttrs(c));
      c.set_output(0, t, Stacked(StaticGroupSize(c.attrs()), c.input_shape(0)));
      return absl::OkStatus();
    })
    .SetKernel([](KernelContext& ctx) -> absl::Status {
      const Tensor& x = ctx.input(0);
      ASSIGN_OR_RETURN(const int g, RuntimeGroupSize(ctx));
      ASSIGN_OR_RETURN(Tensor * out,
                       ctx.allocate_output(0, Stacked(g, x.shape())));
      return RunCollective(ctx, [&](CollectiveGroup& group, int replica,
                                    const ReplicaGroups& groups) {
        return group.AllGather(replica, ctx.node().name(), x, *out, groups);
      });
    })
    // y_r = [x_{m_0}; ...; x_{m_{G-1}}] for the members m_i of r's group.
    // x_k appears in every member's y at row rank(k):
    // dL/dx_k = sum_{r in group} dy_r[rank(k)], the reduce-scatter (sum)
    // of flat dy over the group (chunks of exactly n, no padding).
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      Output flat = Reshape(s, dy[0], {-1});
      Output grad = ReduceScatter(s, flat, CollectiveGroup::ReduceOp::kSum,
                                  GroupsOf(op.attrs()));
      dx->push_back(ReshapeLike(s, grad, op.input(0)));
      return absl::OkStatus();
    });

}  // namespace

Output AllGather(const Scope& scope, Output x, const ReplicaGroups& groups) {
  return scope.AddNode("AllGather", {x}, WithGroupAttrs(groups));
}

}  // namespace ipuflow::ops
