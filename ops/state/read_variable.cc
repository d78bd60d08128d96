#include "ops/state/read_variable.h"

#include "core/op_registry.h"
#include "ops/state/handle.h"

namespace ipuflow::ops {
namespace {

REGISTER_OP("ReadVariable")
    .Input("handle")
    .RequiredAttr("dtype", AttrType::kDType)
    .RequiredAttr("shape", AttrType::kShape)
    .Attr("variable", "")
    .SetStateful(ResourceAccess::kRead)
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      RETURN_IF_ERROR(ExpectHandle(c, 0));
      c.set_output(0, *c.attr<DType>("dtype"), *c.attr<TensorShape>("shape"));
      return absl::OkStatus();
    })
    .SetKernel([](KernelContext& ctx) -> absl::Status {
      ASSIGN_OR_RETURN(VariableResource * var, VariableInput(ctx, 0));
      // Copies under the variable's lock: the output never aliases it.
      ASSIGN_OR_RETURN(Tensor* out, ctx.allocate_output(0, var->shape()));
      return WithNodeName(ctx, var->ReadInto(*out));
    })
    // y = read(v), v a resource handle: no gradient flows to the handle.
    // AddGradients treats reads as leaves; optimizers differentiate with
    // respect to y.
    .SetGradient([](const Scope&, const Node&, absl::Span<const Output>,
                    std::vector<Output>* dx) {
      dx->push_back(Output());
      return absl::OkStatus();
    });

}  // namespace

Output ReadVariable(const Scope& scope, Output handle) {
  return AddHandleNode(scope, "ReadVariable", handle, {});
}

}  // namespace ipuflow::ops
