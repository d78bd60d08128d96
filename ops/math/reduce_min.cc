#include "ops/math/reduce_min.h"

#include "core/op_registry.h"
#include "ops/math/broadcast_grad.h"
#include "ops/math/reduce_max.h"
#include "ops/math/reduction.h"

namespace ipuflow::ops {
namespace {

REGISTER_OP("ReduceMin")
    .Input("x")
    .Attr("axes", std::vector<int64_t>{})
    .Attr("keep_dims", false)
    .SetShapeFn(ReductionShapeFn)
    .SetKernel([](KernelContext& ctx) {
      return ReductionKernel(ctx, Reduction::kMin);
    })
    // y = min over axes of x;  dy/dx = [x == y] / (number of x equal to y).
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      dx->push_back(ReduceExtremumGradient(
          s, op.input(0), OutputOf(op), dy[0],
          op.attr<std::vector<int64_t>>("axes"), op.attr<bool>("keep_dims")));
      return absl::OkStatus();
    });

}  // namespace

Output ReduceMin(const Scope& scope, Output x, std::vector<int64_t> axes,
                 bool keep_dims) {
  return scope.AddNode("ReduceMin", {x},
                       {{"axes", std::move(axes)}, {"keep_dims", keep_dims}});
}

}  // namespace ipuflow::ops
