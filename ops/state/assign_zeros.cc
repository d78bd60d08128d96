#include "ops/state/assign_zeros.h"

#include <cstring>

#include "core/op_registry.h"
#include "ops/cwise.h"
#include "ops/state/handle.h"

namespace ipuflow::ops {
namespace {

REGISTER_OP("AssignZeros")
    .Input("handle")
    .RequiredAttr("dtype", AttrType::kDType)
    .RequiredAttr("shape", AttrType::kShape)
    .Attr("variable", "")
    .SetStateful(ResourceAccess::kWrite)
    .SetShapeFn([](ShapeContext& c) { return ExpectHandle(c, 0); })
    .SetKernel([](KernelContext& ctx) -> absl::Status {
      ASSIGN_OR_RETURN(VariableResource * var, VariableInput(ctx, 0));
      return WithNodeName(ctx, var->Update([&](Tensor& value) {
        char* bytes = static_cast<char*>(value.raw_data());
        const int64_t size = DTypeSize(value.dtype());
        ctx.ParallelFor(value.NumElements(), kCwiseCost / 2,
                        [&](int64_t b, int64_t e) {
                          std::memset(bytes + b * size, 0, (e - b) * size);
                        });
      }));
    })
    .NotDifferentiable("it has no outputs");

}  // namespace

Node* AssignZeros(const Scope& scope, Output handle) {
  return AddHandleNode(scope, "AssignZeros", handle, {});
}

}  // namespace ipuflow::ops
