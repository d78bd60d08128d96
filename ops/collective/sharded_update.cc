#include "ops/collective/sharded_update.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/kernel.h"
#include "core/op_registry.h"
#include "ops/collective/replica_groups_attr.h"
#include "ops/shape_fns.h"
#include "ops/state/handle.h"
#include "ops/state/update_shard.h"

namespace ipuflow::ops {
namespace {

using ReduceOp = CollectiveGroup::ReduceOp;

// The shard of input `i`, checked against the program's replica count.
absl::StatusOr<UpdateShard> CheckedShard(const KernelContext& ctx, int i) {
  ASSIGN_OR_RETURN(const UpdateShard shard, ShardInput(ctx, i));
  const CollectiveGroup* group = ctx.env().collectives;
  const int replicas = group == nullptr ? 1 : group->num_replicas();
  if (shard.sharded() && shard.count != replicas) {
    return ctx.InvalidArgument("the update is sharded over ", shard.count,
                               " replicas but the program runs ", replicas);
  }
  return shard;
}

absl::Status ShardedReduceKernel(KernelContext& ctx, ReduceOp op) {
  const Tensor& x = ctx.input(0);
  ASSIGN_OR_RETURN(const UpdateShard shard, CheckedShard(ctx, 1));
  ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, x.shape()));
  if (!shard.sharded()) {
    return RunCollective(ctx, [&](CollectiveGroup& group, int replica,
                                  const ReplicaGroups& groups) {
      return group.AllReduce(replica, ctx.node().name(), x, *out, op, groups);
    });
  }
  const int64_t n = x.NumElements();
  const size_t esize = DTypeSize(x.dtype());
  Tensor chunk(x.dtype(), TensorShape({shard.ChunkSize(n)}));
  RETURN_IF_ERROR(RunCollective(ctx, [&](CollectiveGroup& group, int replica,
                                         const ReplicaGroups& groups) {
    return group.ReduceScatter(replica, ctx.node().name(), x, chunk, op,
                               groups);
  }));
  const int64_t begin = shard.Begin(n), end = shard.End(n);
  char* dst = static_cast<char*>(out->raw_data());
  std::memset(dst, 0, begin * esize);
  std::memcpy(dst + begin * esize, chunk.raw_data(), (end - begin) * esize);
  std::memset(dst + end * esize, 0, (n - end) * esize);
  return absl::OkStatus();
}

absl::Status ShardedReduceShape(ShapeContext& c) {
  RETURN_IF_ERROR(CheckNumericInput(c, "reduced"));
  RETURN_IF_ERROR(ExpectShardInput(c, 1));
  return shape_fns::Unchanged(c);
}

REGISTER_OP("ShardedCrossReplicaSum")
    .Input("x")
    .Input("shard")
    .Attr("replica_group_size", int64_t{0})  // Always all replicas.
    .Attr("replica_group_type", "consecutive")
    .SetStateful()  // A collective: every replica must run it.
    .SetReplicaIdentity(ReplicaIdentity::kDiffers)  // A chunk per replica.
    .SetShapeFn(ShardedReduceShape)
    .SetKernel([](KernelContext& ctx) {
      return ShardedReduceKernel(ctx, ReduceOp::kSum);
    })
    .NotDifferentiable("it feeds a sharded weight update");

REGISTER_OP("ShardedCrossReplicaMean")
    .Input("x")
    .Input("shard")
    .Attr("replica_group_size", int64_t{0})  // Always all replicas.
    .Attr("replica_group_type", "consecutive")
    .SetStateful()
    .SetReplicaIdentity(ReplicaIdentity::kDiffers)
    .SetShapeFn(ShardedReduceShape)
    .SetKernel([](KernelContext& ctx) {
      return ShardedReduceKernel(ctx, ReduceOp::kMean);
    })
    .NotDifferentiable("it feeds a sharded weight update");

absl::Status GatherKernel(KernelContext& ctx) {
  ASSIGN_OR_RETURN(VariableResource * var, VariableInput(ctx, 0));
  ASSIGN_OR_RETURN(const UpdateShard shard, CheckedShard(ctx, 1));
  if (!shard.sharded()) return absl::OkStatus();
  absl::Status status;
  RETURN_IF_ERROR(WithNodeName(ctx, var->Update([&](Tensor& w) {
    const int64_t n = w.NumElements();
    const size_t esize = DTypeSize(w.dtype());
    const int64_t c = shard.ChunkSize(n);
    const int64_t begin = shard.Begin(n), end = shard.End(n);
    Tensor mine(w.dtype(), TensorShape({c}));
    char* m = static_cast<char*>(mine.raw_data());
    std::memcpy(m, static_cast<const char*>(w.raw_data()) + begin * esize,
                (end - begin) * esize);
    std::memset(m + (end - begin) * esize, 0, (c - (end - begin)) * esize);
    Tensor all(w.dtype(), TensorShape({c * shard.count}));
    status = RunCollective(ctx, [&](CollectiveGroup& group, int replica,
                                    const ReplicaGroups& groups) {
      return group.AllGather(replica, ctx.node().name(), mine, all, groups);
    });
    if (status.ok()) std::memcpy(w.raw_data(), all.raw_data(), n * esize);
  })));
  return status;
}

REGISTER_OP("GatherVariableShards")
    .Input("var")
    .Input("shard")
    .RequiredAttr("dtype", AttrType::kDType)
    .RequiredAttr("shape", AttrType::kShape)
    .Attr("variable", "")
    .Attr("replica_group_size", int64_t{0})  // Always all replicas.
    .Attr("replica_group_type", "consecutive")
    .SetStateful(ResourceAccess::kWrite)
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      RETURN_IF_ERROR(ExpectHandle(c, 0));
      return ExpectShardInput(c, 1);
    })
    .SetKernel(GatherKernel)
    .NotDifferentiable("it has no outputs");

}  // namespace

Output ShardedCrossReplicaSum(const Scope& scope, Output x, Output shard) {
  return scope.AddNode("ShardedCrossReplicaSum", {x, shard},
                       WithGroupAttrs(ReplicaGroups::All()));
}

Output ShardedCrossReplicaMean(const Scope& scope, Output x, Output shard) {
  return scope.AddNode("ShardedCrossReplicaMean", {x, shard},
                       WithGroupAttrs(ReplicaGroups::All()));
}

Node* GatherVariableShards(const Scope& scope, Output var, Output shard) {
  return AddHandleNode(scope, "GatherVariableShards", var, {shard},
                       WithGroupAttrs(ReplicaGroups::All()));
}

}  // namespace ipuflow::ops
