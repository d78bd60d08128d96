#include "ops/math/equal.h"

#include "core/half.h"
#include "core/op_registry.h"
#include "ops/cwise.h"
#include "ops/shape_fns.h"

namespace ipuflow::ops {
namespace {

struct EqualFn {
  template <typename A, typename B>
  auto operator()(const A& a, const B& b) const {
    return a == b;
  }
};

REGISTER_OP("Equal")
    .Input("x")
    .Input("y")
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      RETURN_IF_ERROR(shape_fns::BroadcastCompare(c));
      if (c.input_dtype(0) == DType::kResource) {
        return absl::InvalidArgumentError(
            "inputs are resource handles; compare the values they hold");
      }
      return absl::OkStatus();
    })
    .SetKernel([](KernelContext& ctx) -> absl::Status {
      IPUFLOW_SWITCH_ALL(ctx.input(0).dtype(),
                         return (BinaryKernel<T, bool>(ctx, EqualFn())),
                         return UnsupportedDType(ctx, ctx.input(0).dtype()));
    })
    .NotDifferentiable("the output is bool");

}  // namespace

Output Equal(const Scope& scope, Output x, Output y) {
  return scope.AddNode("Equal", {x, y});
}

}  // namespace ipuflow::ops
