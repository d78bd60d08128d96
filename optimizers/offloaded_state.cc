#include "optimizers/offloaded_state.h"

#include "core/kernel.h"
#include "core/op_registry.h"
#include "ops/shape_fns.h"

namespace ipuflow::optimizers {
namespace {

absl::Status Stream(KernelContext& ctx, bool load) {
  const Node& node = ctx.node();
  ctx.set_output(0, ctx.input(0));
  const std::string id = node.attr<std::string>("state");
  auto state = std::dynamic_pointer_cast<RemoteState>(
      node.graph()->FindHostResource(id));
  const int update = static_cast<int>(node.attr<int64_t>("update"));
  if (load) {
    // Gone state (below) updates whole variables.
    const std::pair<int, int> shard =
        state == nullptr ? std::pair<int, int>{0, 1}
                         : state->UpdateShardOf(ctx.env(), update);
    ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(1, TensorShape({2})));
    out->data<int32_t>()[0] = shard.first;
    out->data<int32_t>()[1] = shard.second;
  }
  if (!ctx.input(0).scalar<bool>()) return absl::OkStatus();
  // Gone: its optimizer was destroyed and no device program planned it
  // (a program holds the state it planned), so nothing is offloaded.
  if (state == nullptr) return absl::OkStatus();
  return load ? state->Load(ctx.env(), update)
              : state->Store(ctx.env(), update);
}

REGISTER_OP("OffloadedStateLoad")
    .Input("flag")
    .RequiredAttr("state", AttrType::kString)
    .RequiredAttr("update", AttrType::kInt)
    .SetStateful()
    // The shard differs per replica when the update is sharded.
    .SetReplicaIdentity(ReplicaIdentity::kDiffers)
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      RETURN_IF_ERROR(ops::shape_fns::Unchanged(c));
      c.set_output(1, DType::kInt32, TensorShape({2}));
      return absl::OkStatus();
    })
    .SetKernel([](KernelContext& ctx) { return Stream(ctx, /*load=*/true); })
    .NotDifferentiable("it streams optimizer state");

REGISTER_OP("OffloadedStateStore")
    .Input("flag")
    .RequiredAttr("state", AttrType::kString)
    .RequiredAttr("update", AttrType::kInt)
    .SetStateful()
    .SetShapeFn(ops::shape_fns::Unchanged)
    .SetKernel([](KernelContext& ctx) { return Stream(ctx, /*load=*/false); })
    .NotDifferentiable("it streams optimizer state");

Output Build(const char* op, const Scope& scope, const std::string& id,
             const std::shared_ptr<RemoteState>& state, int update,
             Output flag) {
  Node* n = scope.AddNode(
      op, {flag}, {{"state", id}, {"update", static_cast<int64_t>(update)}});
  if (n == nullptr) return Output();
  scope.graph()->AddHostResource(id, state, n);
  return Output(n);
}

}  // namespace

Output OffloadedStateLoad(const Scope& scope, const std::string& id,
                          const std::shared_ptr<RemoteState>& state, int update,
                          Output flag) {
  return Build("OffloadedStateLoad", scope, id, state, update, flag);
}

Output OffloadedStateStore(const Scope& scope, const std::string& id,
                           const std::shared_ptr<RemoteState>& state,
                           int update, Output flag) {
  return Build("OffloadedStateStore", scope, id, state, update, flag);
}

}  // namespace ipuflow::optimizers
