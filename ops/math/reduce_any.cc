#include "ops/math/reduce_any.h"

#include "core/op_registry.h"
#include "ops/math/reduction.h"

namespace ipuflow::ops {
namespace {

REGISTER_OP("ReduceAny")
    .Input("x")
    .Attr("axes", std::vector<int64_t>{})
    .Attr("keep_dims", false)
    .SetShapeFn(BoolReductionShapeFn)
    .SetKernel([](KernelContext& ctx) {
      return BoolReductionKernel(ctx, /*all=*/false);
    })
    .NotDifferentiable("bool input and output");

}  // namespace

Output ReduceAny(const Scope& scope, Output x, std::vector<int64_t> axes,
                 bool keep_dims) {
  return scope.AddNode("ReduceAny", {x},
                       {{"axes", std::move(axes)}, {"keep_dims", keep_dims}});
}

}  // namespace ipuflow::ops
