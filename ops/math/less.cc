#include "ops/math/less.h"

#include "absl/strings/str_cat.h"
#include "core/half.h"
#include "core/op_registry.h"
#include "ops/cwise.h"
#include "ops/shape_fns.h"

namespace ipuflow::ops {
namespace {

struct LessFn {
  template <typename A, typename B>
  auto operator()(const A& a, const B& b) const {
    return a < b;
  }
};

REGISTER_OP("Less")
    .Input("x")
    .Input("y")
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      RETURN_IF_ERROR(shape_fns::BroadcastCompare(c));
      const DType dt = c.input_dtype(0);
      if (dt == DType::kBool || dt == DType::kResource) {
        return absl::InvalidArgumentError(absl::StrCat(
            "inputs are ", DTypeName(dt), "; expected a numeric type"));
      }
      return absl::OkStatus();
    })
    .SetKernel([](KernelContext& ctx) -> absl::Status {
      IPUFLOW_SWITCH_NUMERIC(
          ctx.input(0).dtype(), return (BinaryKernel<T, bool>(ctx, LessFn())),
          return UnsupportedDType(ctx, ctx.input(0).dtype()));
    })
    .NotDifferentiable("the output is bool");

}  // namespace

Output Less(const Scope& scope, Output x, Output y) {
  return scope.AddNode("Less", {x, y});
}

}  // namespace ipuflow::ops
