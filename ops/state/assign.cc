#include "ops/state/assign.h"

#include "core/op_registry.h"
#include "ops/state/handle.h"

namespace ipuflow::ops {
namespace {

absl::Status AssignShape(ShapeContext& c) {
  RETURN_IF_ERROR(ExpectHandle(c, 0));
  return ExpectMatchesVariable(c, 1);  // No outputs.
}

// variable op= input 1; sign 0: assign, +1: add, -1: subtract.
absl::Status AssignKernel(KernelContext& ctx, float sign) {
  ASSIGN_OR_RETURN(VariableResource * var, VariableInput(ctx, 0));
  RETURN_IF_ERROR(CheckMatchesVariable(ctx, 1, *var));
  if (sign == 0) return WithNodeName(ctx, var->Assign(ctx.input(1)));
  if (var->dtype() == DType::kBool) {
    return ctx.InvalidArgument("cannot add to bool variable '", var->name(),
                               "'");
  }
  return WithNodeName(ctx, var->AssignAdd(ctx.input(1), sign));
}

REGISTER_OP("Assign")
    .Input("handle")
    .Input("value")
    .RequiredAttr("dtype", AttrType::kDType)
    .RequiredAttr("shape", AttrType::kShape)
    .Attr("variable", "")
    .SetStateful(ResourceAccess::kWrite)
    .SetShapeFn(AssignShape)
    .SetKernel([](KernelContext& ctx) { return AssignKernel(ctx, 0); })
    .NotDifferentiable("it has no outputs");

REGISTER_OP("AssignAdd")
    .Input("handle")
    .Input("delta")
    .RequiredAttr("dtype", AttrType::kDType)
    .RequiredAttr("shape", AttrType::kShape)
    .Attr("variable", "")
    .SetStateful(ResourceAccess::kWrite)
    .SetShapeFn(AssignShape)
    .SetKernel([](KernelContext& ctx) { return AssignKernel(ctx, 1); })
    .NotDifferentiable("it has no outputs");

REGISTER_OP("AssignSub")
    .Input("handle")
    .Input("delta")
    .RequiredAttr("dtype", AttrType::kDType)
    .RequiredAttr("shape", AttrType::kShape)
    .Attr("variable", "")
    .SetStateful(ResourceAccess::kWrite)
    .SetShapeFn(AssignShape)
    .SetKernel([](KernelContext& ctx) { return AssignKernel(ctx, -1); })
    .NotDifferentiable("it has no outputs");

}  // namespace

Node* Assign(const Scope& scope, Output handle, Output value) {
  return AddHandleNode(scope, "Assign", handle, {value});
}

Node* AssignAdd(const Scope& scope, Output handle, Output delta) {
  return AddHandleNode(scope, "AssignAdd", handle, {delta});
}

Node* AssignSub(const Scope& scope, Output handle, Output delta) {
  return AddHandleNode(scope, "AssignSub", handle, {delta});
}

}  // namespace ipuflow::ops
