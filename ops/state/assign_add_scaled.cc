#include "ops/state/assign_add_scaled.h"

#include "core/half.h"
#include "core/op_registry.h"
#include "ops/cwise.h"
#include "ops/state/handle.h"

namespace ipuflow::ops {
namespace {

// AssignScaledAddScaled's inputs; AssignAddScaled has the first three.
enum Input { kVar, kDelta, kScale, kVariableScale };

// The float32 variable of input kVar, delta checked against it.
absl::StatusOr<VariableResource*> Float32Variable(KernelContext& ctx) {
  ASSIGN_OR_RETURN(VariableResource * var, VariableInput(ctx, kVar));
  RETURN_IF_ERROR(CheckMatchesVariable(ctx, kDelta, *var));
  if (var->dtype() != DType::kFloat32) {
    return ctx.InvalidArgument("variable '", var->name(), "' is ",
                               DTypeName(var->dtype()), "; ", ctx.node().op(),
                               " takes float32");
  }
  return var;
}

// variable = variable * variable_scale + delta * scale; without a
// variable_scale, variable + delta * scale. Eigen's packets; each product
// is rounded before the add (this library is built without FP contraction).
absl::Status AssignAddScaledKernel(KernelContext& ctx) {
  ASSIGN_OR_RETURN(VariableResource * var, Float32Variable(ctx));
  const float scale = ctx.input(kScale).scalar<float>();
  const bool scaled = ctx.num_inputs() > kVariableScale;
  const float var_scale =
      scaled ? ctx.input(kVariableScale).scalar<float>() : 1.0f;
  const float* delta = ctx.input(kDelta).data<float>();
  return WithNodeName(ctx, var->Update([&](Tensor& value) {
    float* acc = value.data<float>();
    ctx.ParallelFor(value.NumElements(), kCwiseCost, [&](int64_t b, int64_t e) {
      using Arr = Eigen::Array<float, Eigen::Dynamic, 1>;
      Eigen::Map<Arr> a(acc + b, e - b);
      const Eigen::Map<const Arr> d(delta + b, e - b);
      if (scaled) {
        a = a * var_scale + d * scale;
      } else {
        a = a + d * scale;
      }
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

REGISTER_OP("AssignScaledAddScaled")
    .Input("handle")
    .Input("delta")
    .Input("delta_scale")
    .Input("variable_scale")
    .RequiredAttr("dtype", AttrType::kDType)
    .RequiredAttr("shape", AttrType::kShape)
    .Attr("variable", "")
    .SetStateful(ResourceAccess::kWrite)
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      RETURN_IF_ERROR(ExpectHandle(c, kVar));
      RETURN_IF_ERROR(ExpectMatchesVariable(c, kDelta));
      RETURN_IF_ERROR(ExpectFloatScalar(c, kScale));
      return ExpectFloatScalar(c, kVariableScale);  // No outputs.
    })
    .SetKernel(AssignAddScaledKernel)
    .NotDifferentiable("it has no outputs");

}  // namespace

Node* AssignAddScaled(const Scope& scope, Output handle, Output delta,
                      Output scale) {
  return AddHandleNode(scope, "AssignAddScaled", handle, {delta, scale});
}

Node* AssignScaledAddScaled(const Scope& scope, Output handle, Output delta,
                            Output variable_scale, Output delta_scale) {
  return AddHandleNode(scope, "AssignScaledAddScaled", handle,
                       {delta, delta_scale, variable_scale});
}

}  // namespace ipuflow::ops
