#include "ops/math/reduce_prod.h"

#include "core/op_registry.h"
#include "ops/array/const.h"
#include "ops/array/fill.h"
#include "ops/math/broadcast_grad.h"
#include "ops/math/cast.h"
#include "ops/math/div.h"
#include "ops/math/equal.h"
#include "ops/math/mul.h"
#include "ops/math/reduce_grad_like.h"
#include "ops/math/reduce_sum.h"
#include "ops/math/reduction.h"
#include "ops/math/select.h"

namespace ipuflow::ops {
namespace {

REGISTER_OP("ReduceProd")
    .Input("x")
    .Attr("axes", std::vector<int64_t>{})
    .Attr("keep_dims", false)
    .SetShapeFn(FloatReductionShapeFn)
    .SetKernel([](KernelContext& ctx) {
      return ReductionKernel(ctx, Reduction::kProd);
    })
    // y = prod over axes of x;  dy/dx_i = prod over j != i of x_j:
    //   y / x_i                        where the row has no zero,
    //   prod of the non-zero x_j       at the row's only zero,
    //   0                              elsewhere (two zeros or more, or a
    //                                  non-zero x_i beside a zero).
    // Counting the zeros keeps it exact at zeros, where y / x is 0 / 0.
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      const Output x = op.input(0), y = OutputOf(op);
      const auto& axes = op.attr<std::vector<int64_t>>("axes");
      const DType dt = x.dtype();
      const Output zero = ZerosLike(s, x), one = OnesLike(s, x);
      const Output is_zero = Equal(s, x, zero);
      const Output zeros =
          ReduceGradLike(s, ReduceSum(s, Cast(s, is_zero, dt), axes), x, axes);
      const Output nonzero_prod = ReduceGradLike(
          s, ReduceProd(s, Select(s, is_zero, one, x), axes), x, axes);
      const Output none = Equal(s, zeros, Const(s, 0.0, dt));
      const Output only = Equal(s, zeros, Const(s, 1.0, dt));
      const Output others = Select(
          s, is_zero, Select(s, only, nonzero_prod, zero),
          Select(s, none, Div(s, ReduceGradLike(s, y, x, axes), x), zero));
      dx->push_back(Mul(s, others, ReduceGradLike(s, dy[0], x, axes)));
      return absl::OkStatus();
    });

}  // namespace

Output ReduceProd(const Scope& scope, Output x, std::vector<int64_t> axes,
                  bool keep_dims) {
  return scope.AddNode("ReduceProd", {x},
                       {{"axes", std::move(axes)}, {"keep_dims", keep_dims}});
}

}  // namespace ipuflow::ops
