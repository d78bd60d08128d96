#include "ops/collective/cross_replica.h"

#include "core/ipu/collective_group.h"
#include "core/kernel.h"
#include "core/op_registry.h"
#include "ops/shape_fns.h"

namespace ipuflow::ops {
namespace {

absl::Status AllReduceKernel(KernelContext& ctx, CollectiveGroup::ReduceOp op) {
  const Tensor& x = ctx.input(0);
  Tensor* out = ctx.allocate_output(0, x.shape());
  CollectiveGroup* group = ctx.env().collectives;
  if (group == nullptr || group->num_replicas() == 1) {
    out->CopyFrom(x);
    return absl::OkStatus();
  }
  absl::Status s =
      group->AllReduce(ctx.env().replica, ctx.node().name(), x, *out, op);
  if (!s.ok()) return absl::Status(s.code(), absl::StrCat(ctx.node().DebugName(), ": ", s.message()));
  return absl::OkStatus();
}

absl::Status NumericShape(ShapeContext& c) {
  if (c.input_dtype(0) == DType::kBool || c.input_dtype(0) == DType::kResource) {
    return absl::InvalidArgumentError(absl::StrCat(
        c.InputName(0), " is ", DTypeName(c.input_dtype(0)),
        "; only numeric tensors can be reduced across replicas"));
  }
  return shape_fns::Unchanged(c);
}

REGISTER_OP("CrossReplicaSum")
    .Input("x")
    .SetStateful()  // A collective: every replica must run it.
    .SetShapeFn(NumericShape)
    .SetKernel([](KernelContext& ctx) {
      return AllReduceKernel(ctx, CollectiveGroup::ReduceOp::kSum);
    })
    // y_r = sum_k x_k;  dL/dx_r = sum_k dL/dy_k
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      dx->push_back(CrossReplicaSum(s, dy[0]));
      return absl::OkStatus();
    });

REGISTER_OP("CrossReplicaMean")
    .Input("x")
    .SetStateful()
    .SetShapeFn(NumericShape)
    .SetKernel([](KernelContext& ctx) {
      return AllReduceKernel(ctx, CollectiveGroup::ReduceOp::kMean);
    })
    // y_r = mean_k x_k;  dL/dx_r = mean_k dL/dy_k
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      dx->push_back(CrossReplicaMean(s, dy[0]));
      return absl::OkStatus();
    });

}  // namespace

Output CrossReplicaSum(const Scope& scope, Output x) {
  return scope.AddNode("CrossReplicaSum", {x});
}

Output CrossReplicaMean(const Scope& scope, Output x) {
  return scope.AddNode("CrossReplicaMean", {x});
}

}  // namespace ipuflow::ops
