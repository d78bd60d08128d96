#include "ops/state/no_op.h"

#include "absl/strings/str_cat.h"
#include "core/kernel.h"
#include "core/op_registry.h"

namespace ipuflow::ops {
namespace {

REGISTER_OP("NoOp")
    .SetShapeFn([](ShapeContext&) { return absl::OkStatus(); })
    .SetKernel([](KernelContext&) { return absl::OkStatus(); })
    .NotDifferentiable("it has no inputs or outputs");

}  // namespace

Node* NoOp(const Scope& scope) { return scope.AddNode("NoOp", {}); }

Node* Group(const Scope& scope, const std::vector<Node*>& deps) {
  if (!scope.ok()) return nullptr;
  for (size_t i = 0; i < deps.size(); ++i) {
    if (deps[i] == nullptr) {
      scope.UpdateStatus(absl::InvalidArgumentError(absl::StrCat(
          "Group: dependency ", i, " is null (built from a failed op?)")));
      return nullptr;
    }
  }
  return scope.WithControlDependencies(deps).AddNode("NoOp", {}, {}, "Group");
}

}  // namespace ipuflow::ops
