#include "ops/math/arg_max.h"

#include "core/op_registry.h"
#include "ops/math/arg_reduce.h"

namespace ipuflow::ops {
namespace {

REGISTER_OP("ArgMax")
    .Input("x")
    .RequiredAttr("axis", AttrType::kInt)
    .Attr("output_type", DType::kInt64)
    .SetShapeFn(ArgReduceShapeFn)
    .SetKernel([](KernelContext& ctx) { return ArgReduceKernel(ctx, false); })
    .NotDifferentiable("the output is an integer index");

}  // namespace

Output ArgMax(const Scope& scope, Output x, int64_t axis, DType output_type) {
  return scope.AddNode("ArgMax", {x},
                       {{"axis", axis}, {"output_type", output_type}});
}

}  // namespace ipuflow::ops
