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
      if (!var->initialized()) {
        // The error names the read (ReadInto's FailedPrecondition).
        ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, var->shape()));
        return WithNodeName(ctx, var->ReadInto(*out));
      }
      // Copy-on-write: the output shares the value's buffer, taken under
      // the variable's lock. Every write (Assign, AssignAdd, Update)
      // copies a shared buffer before it writes (core/resource.h), so a
      // later write never changes a value already read, and a variable
      // that is read every step but written once per N (a weight under
      // gradient accumulation) is never copied. Update is the one locked
      // access to the value that resource.h offers; it leaves an unshared
      // value as it is (a value a previous read still holds is copied
      // first: the cost of today's read, once).
      Tensor shared;
      RETURN_IF_ERROR(WithNodeName(
          ctx, var->Update([&](Tensor& value) { shared = value; })));
      ctx.set_output(0, std::move(shared));
      return absl::OkStatus();
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
