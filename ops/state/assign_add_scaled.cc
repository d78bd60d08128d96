#include "ops/state/assign_add_scaled.h"

#include "core/op_registry.h"
#include "ops/cwise.h"
#include "ops/state/handle.h"

namespace ipuflow::ops {
namespace {

enum Input { kVar, kDelta, kScale };

absl::Status AssignAddScaledKernel(KernelContext& ctx) {
  ASSIGN_OR_RETURN(VariableResource * var, VariableInput(ctx, kVar));
  RETURN_IF_ERROR(CheckMatchesVariable(ctx, kDelta, *var));
  if (var->dtype() != DType::kFloat32) {
    return ctx.InvalidArgument("variable '", var->name(), "' is ",
                               DTypeName(var->dtype()),
                               "; AssignAddScaled takes float32");
  }
  const float scale = ctx.input(kScale).scalar<float>();
  const float* delta = ctx.input(kDelta).data<float>();
  return WithNodeName(ctx, var->Update([&](Tensor& value) {
    float* acc = value.data<float>();
    ctx.ParallelFor(value.NumElements(), kCwiseCost,
                    [&](int64_t b, int64_t e) {
      // Eigen's packets; each product is rounded before the add (this
      // library is built without FP contraction).
      using Arr = Eigen::Array<float, Eigen::Dynamic, 1>;
      Eigen::Map<Arr> a(acc + b, e - b);
      a = a + Eigen::Map<const Arr>(delta + b, e - b) * scale;
    });
  }));
}

REGISTER_OP("AssignAddScaled")
    .Input("handle")
    .Input("delta")
    .Input("scale")
    .RequiredAttr("dtype", AttrType::kDType)
    .RequiredAttr("shape", AttrType::kShape)
    .Attr("variable", "")
    .SetStateful(ResourceAccess::kWrite)
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      RETURN_IF_ERROR(ExpectHandle(c, kVar));
      RETURN_IF_ERROR(ExpectMatchesVariable(c, kDelta));
      return ExpectFloatScalar(c, kScale);  // No outputs.
    })
    .SetKernel(AssignAddScaledKernel)
    .NotDifferentiable("it has no outputs");

}  // namespace

Node* AssignAddScaled(const Scope& scope, Output handle, Output delta,
                      Output scale) {
  return AddHandleNode(scope, "AssignAddScaled", handle, {delta, scale});
}

}  // namespace ipuflow::ops
