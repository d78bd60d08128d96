#include "ops/math/reduce_mean.h"

#include "core/op_registry.h"
#include "ops/math/reduce_grad_like.h"
#include "ops/math/reduction.h"

namespace ipuflow::ops {
namespace {

REGISTER_OP("ReduceMean")
    .Input("x")
    .Attr("axes", std::vector<int64_t>{})
    .Attr("keep_dims", false)
    .SetShapeFn(ReductionShapeFn)
    .SetKernel([](KernelContext& ctx) {
      return ReductionKernel(ctx, Reduction::kMean);
    })
    // y = sum over axes of x / n (n: elements per output);  dy/dx = 1 / n:
    // dy broadcast back over the axes and divided by n (n known at run time).
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      dx->push_back(ReduceGradLike(s, dy[0], op.input(0),
                                   op.attr<std::vector<int64_t>>("axes"),
                                   /*mean=*/true));
      return absl::OkStatus();
    });

}  // namespace

Output ReduceMean(const Scope& scope, Output x, std::vector<int64_t> axes,
                  bool keep_dims) {
  return scope.AddNode("ReduceMean", {x},
                       {{"axes", std::move(axes)}, {"keep_dims", keep_dims}});
}

}  // namespace ipuflow::ops
