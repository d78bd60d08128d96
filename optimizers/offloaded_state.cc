#include "optimizers/offloaded_state.h"

#include "core/kernel.h"
#include "core/op_registry.h"
#include "ops/shape_fns.h"

namespace ipuflow::optimizers {
namespace {

absl::Status Stream(KernelContext& ctx, bool load) {
  const Node& node = ctx.node();
  ctx.set_output(0, ctx.input(0));
  if (!ctx.input(0).scalar<bool>()) return absl::OkStatus();
  const std::string id = node.attr<std::string>("state");
  auto state =
      std::dynamic_pointer_cast<RemoteState>(node.graph()->FindHostResource(id));
  // Gone: its optimizer was destroyed and no device program planned it
  // (a program holds the state it planned), so nothing is offloaded.
  if (state == nullptr) return absl::OkStatus();
  const int update = static_cast<int>(node.attr<int64_t>("update"));
  return load ? state->Load(ctx.env(), update) : state->Store(ctx.env(), update);
}

REGISTER_OP("OffloadedStateLoad")
    .Input("flag")
    .RequiredAttr("state", AttrType::kString)
    .RequiredAttr("update", AttrType::kInt)
    .SetStateful()
    .SetShapeFn(ops::shape_fns::Unchanged)
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
  Node* n = scope.AddNode(op, {flag},
                          {{"state", id}, {"update", static_cast<int64_t>(update)}});
  if (n == nullptr) return Output();
  scope.graph()->AddHostResource(id, state, n);
  return Output(n);
}

}  // namespace

Output OffloadedStateLoad(const Scope& scope, const std::string& id,
                          const std::shared_ptr<RemoteState>& state,
                          int update, Output flag) {
  return Build("OffloadedStateLoad", scope, id, state, update, flag);
}

Output OffloadedStateStore(const Scope& scope, const std::string& id,
                           const std::shared_ptr<RemoteState>& state,
                           int update, Output flag) {
  return Build("OffloadedStateStore", scope, id, state, update, flag);
}

}  // namespace ipuflow::optimizers
