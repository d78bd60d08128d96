#include "ops/array/fill.h"

#include "absl/strings/str_cat.h"
#include "core/op_registry.h"
#include "core/tensor_eigen.h"
#include "ops/cwise.h"
#include "ops/shape_fns.h"

namespace ipuflow::ops {
namespace {

absl::Status FillWith(KernelContext& ctx, const TensorShape& shape,
                      double value) {
  ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, shape));
  IPUFLOW_SWITCH_ALL(out->dtype(),
                     out->flat<T>().setConstant(static_cast<T>(value)),
                     return UnsupportedDType(ctx, out->dtype()));
  return absl::OkStatus();
}

REGISTER_OP("Fill")
    .RequiredAttr("shape", AttrType::kShape)
    .RequiredAttr("value", AttrType::kFloat)
    .Attr("dtype", DType::kFloat32)
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      ASSIGN_OR_RETURN(TensorShape shape, c.attr<TensorShape>("shape"));
      ASSIGN_OR_RETURN(DType dtype, c.attr<DType>("dtype"));
      RETURN_IF_ERROR(c.attr<float>("value").status());
      if (dtype == DType::kResource) {
        return absl::InvalidArgumentError(
            "attribute 'dtype' is resource; Fill makes data tensors");
      }
      if (!shape.IsFullyDefined()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "shape ", shape.DebugString(),
            " must be fully defined (use ZerosLike/OnesLike for a shape "
            "known only at run time)"));
      }
      c.set_output(0, dtype, shape);
      return absl::OkStatus();
    })
    .SetKernel([](KernelContext& ctx) {
      return FillWith(ctx, ctx.attr<TensorShape>("shape"),
                      ctx.attr<float>("value"));
    })
    .NotDifferentiable("Fill has no tensor inputs");

REGISTER_OP("ZerosLike")
    .Input("x")
    .SetShapeFn(shape_fns::Unchanged)
    .SetKernel([](KernelContext& ctx) {
      return FillWith(ctx, ctx.input(0).shape(), 0.0);
    })
    .NotDifferentiable("the output does not depend on the input's values");

REGISTER_OP("OnesLike")
    .Input("x")
    .SetShapeFn(shape_fns::Unchanged)
    .SetKernel([](KernelContext& ctx) {
      return FillWith(ctx, ctx.input(0).shape(), 1.0);
    })
    .NotDifferentiable("the output does not depend on the input's values");

}  // namespace

Output Fill(const Scope& scope, const TensorShape& shape, double value,
            DType dtype) {
  return scope.AddNode("Fill", {},
                       {{"shape", shape}, {"value", value}, {"dtype", dtype}});
}

Output ZerosLike(const Scope& scope, Output x) {
  return scope.AddNode("ZerosLike", {x});
}

Output OnesLike(const Scope& scope, Output x) {
  return scope.AddNode("OnesLike", {x});
}

}  // namespace ipuflow::ops
