#include "ops/math/reduce_max.h"

#include "core/op_registry.h"
#include "ops/math/broadcast_grad.h"
#include "ops/math/cast.h"
#include "ops/math/div.h"
#include "ops/math/equal.h"
#include "ops/math/mul.h"
#include "ops/math/reduce_grad_like.h"
#include "ops/math/reduce_sum.h"
#include "ops/math/reduction.h"

namespace ipuflow::ops {
namespace {

REGISTER_OP("ReduceMax")
    .Input("x")
    .Attr("axes", std::vector<int64_t>{})
    .Attr("keep_dims", false)
    .SetShapeFn(ReductionShapeFn)
    .SetKernel([](KernelContext& ctx) {
      return ReductionKernel(ctx, Reduction::kMax);
    })
    // y = max over axes of x;  dy/dx = [x == y] / (number of x equal to y):
    // the gradient goes to the maxima, shared equally between ties (the
    // average of the one-sided derivatives, as TensorFlow does).
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      dx->push_back(ReduceExtremumGradient(
          s, op.input(0), OutputOf(op), dy[0],
          op.attr<std::vector<int64_t>>("axes"), op.attr<bool>("keep_dims")));
      return absl::OkStatus();
    });

}  // namespace

Output ReduceExtremumGradient(const Scope& s, Output x, Output y, Output dy,
                              const std::vector<int64_t>& axes,
                              bool keep_dims) {
  const Output is_max =
      Cast(s, Equal(s, x, ReduceGradLike(s, y, x, axes)), x.dtype());
  const Output ties = ReduceSum(s, is_max, axes, keep_dims);
  return Mul(s, is_max, ReduceGradLike(s, Div(s, dy, ties), x, axes));
}

Output ReduceMax(const Scope& scope, Output x, std::vector<int64_t> axes,
                 bool keep_dims) {
  return scope.AddNode("ReduceMax", {x},
                       {{"axes", std::move(axes)}, {"keep_dims", keep_dims}});
}

}  // namespace ipuflow::ops
