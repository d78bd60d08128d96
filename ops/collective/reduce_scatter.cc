#include "ops/collective/reduce_scatter.h"

#include "core/kernel.h"
#include "core/op_registry.h"
#include "ops/array/const.h"
#include "ops/array/reshape.h"
#include "ops/array/slice.h"
#include "ops/collective/all_gather.h"
#include "ops/collective/cross_replica.h"
#include "ops/collective/replica_groups_attr.h"
#include "ops/math/div.h"
#include "ops/math/mul.h"

namespace ipuflow::ops {
namespace {

using ReduceOp = CollectiveGroup::ReduceOp;

absl::StatusOr<ReduceOp> ParseOp(const std::string& op) {
  if (op == "sum") return ReduceOp::kSum;
  if (op == "mean") return ReduceOp::kMean;
  if (op == "local") return ReduceOp::kLocal;
  return absl::InvalidArgumentError(
      absl::StrCat("op is '", op, "'; expected 'sum', 'mean' or 'local'"));
}

const char* OpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kMean:
      return "mean";
    case ReduceOp::kLocal:
      return "local";
  }
  return "?";
}

REGISTER_OP("ReduceScatter")
    .Input("x")
    .Attr("op", "sum")
    .Attr("replica_group_size", int64_t{0})  // 0: all replicas.
    .Attr("replica_group_type", "consecutive")
    .SetStateful()  // A collective: every replica must run it.
    .SetReplicaIdentity(ReplicaIdentity::kDiffers)  // A chunk per replica.
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      const DType t = c.input_dtype(0);
      RETURN_IF_ERROR(CheckNumericInput(c, "reduced"));
      ASSIGN_OR_RETURN(std::string op, c.attr<std::string>("op"));
      RETURN_IF_ERROR(ParseOp(op).status());
      RETURN_IF_ERROR(CheckGroupAttrs(c));
      const int64_t n = c.input_shape(0).num_elements();
      const int64_t g = StaticGroupSize(c.attrs());
      c.set_output(
          0, t, TensorShape({n < 0 || g < 0 ? kUnknownDim : (n + g - 1) / g}));
      return absl::OkStatus();
    })
    .SetKernel([](KernelContext& ctx) -> absl::Status {
      const Tensor& x = ctx.input(0);
      ASSIGN_OR_RETURN(ReduceOp op, ParseOp(ctx.attr<std::string>("op")));
      ASSIGN_OR_RETURN(const int g, RuntimeGroupSize(ctx));
      const int64_t n = x.NumElements();
      ASSIGN_OR_RETURN(Tensor * out,
                       ctx.allocate_output(0, TensorShape({(n + g - 1) / g})));
      return RunCollective(ctx, [&](CollectiveGroup& group, int replica,
                                    const ReplicaGroups& groups) {
        return group.ReduceScatter(replica, ctx.node().name(), x, *out, op,
                                   groups);
      });
    })
    // y_r = chunk rank(r) of pad(sum_{k in group} flat(x_k)), c per chunk.
    // Element j of x_k lands in chunk j / c, owned by the member of rank
    // j / c: dL/dx_k[j] = dy_{that member}[j mod c], i.e. the all-gather of
    // dy over the group, flattened, without the padding. Mean: / G.
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) -> absl::Status {
      const std::string& name = op.attr<std::string>("op");
      if (name == "local") {
        return absl::UnimplementedError(
            absl::StrCat(op.DebugName(),
                         ": no gradient for op 'local' (it keeps a chunk "
                         "of a value that is the same on every replica)"));
      }
      const TensorShape& x_shape = op.input(0).shape();
      const int64_t n = x_shape.num_elements();
      if (n < 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            op.DebugName(), ": the gradient needs x's element count; x is ",
            x_shape.DebugString()));
      }
      const ReplicaGroups groups = GroupsOf(op.attrs());
      Output flat = Reshape(s, AllGather(s, dy[0], groups), {-1});
      Output grad = Slice(s, flat, {0}, {n});
      if (name == "mean") {
        const DType t = dy[0].dtype();
        const int64_t g = StaticGroupSize(op.attrs());
        // G unknown when building (all replicas): a sum of ones counts it.
        grad = g > 0
                   ? Mul(s, grad, Const(s, 1.0 / g, t))
                   : Div(s, grad, CrossReplicaSum(s, Const(s, 1.0, t), groups));
      }
      dx->push_back(Reshape(s, grad, x_shape));
      return absl::OkStatus();
    });

}  // namespace

Output ReduceScatter(const Scope& scope, Output x, CollectiveGroup::ReduceOp op,
                     const ReplicaGroups& groups) {
  return scope.AddNode("ReduceScatter", {x},
                       WithGroupAttrs(groups, {{"op", OpName(op)}}));
}

}  // namespace ipuflow::ops
