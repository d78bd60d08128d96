#include "ops/math/sqrt.h"

#include "core/half.h"
#include "core/op_registry.h"
#include "ops/array/const.h"
#include "ops/cwise.h"
#include "ops/math/broadcast_grad.h"
#include "ops/math/div.h"
#include "ops/math/mul.h"
#include "ops/math/vector_math.h"
#include "ops/shape_fns.h"

namespace ipuflow::ops {
namespace {

REGISTER_OP("Sqrt")
    .Input("x")
    .SetShapeFn(shape_fns::UnchangedFloat)
    .SetKernel([](KernelContext& ctx) {
      return UnaryArrayKernel(ctx, VecSqrt);
    })
    // y = sqrt(x);  dy/dx = 1 / (2 sqrt(x)) = 0.5 / y  (inf at x = 0)
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      const Output half = Const(s, 0.5, op.input(0).dtype());
      dx->push_back(Div(s, Mul(s, dy[0], half), OutputOf(op)));
      return absl::OkStatus();
    });

}  // namespace

Output Sqrt(const Scope& scope, Output x) { return scope.AddNode("Sqrt", {x}); }

}  // namespace ipuflow::ops
