#include "ops/math/rsqrt.h"

#include "core/op_registry.h"
#include "ops/array/const.h"
#include "ops/cwise.h"
#include "ops/math/broadcast_grad.h"
#include "ops/math/mul.h"
#include "ops/math/square.h"
#include "ops/math/vector_math.h"
#include "ops/shape_fns.h"

namespace ipuflow::ops {
namespace {

REGISTER_OP("Rsqrt")
    .Input("x")
    .SetShapeFn(shape_fns::UnchangedFloat)
    .SetKernel([](KernelContext& ctx) {
      return UnaryArrayKernel(ctx, VecRsqrt);
    })
    // y = x^(-1/2);  dy/dx = -1/2 x^(-3/2) = -0.5 y^3
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      const Output y = OutputOf(op);
      const Output minus_half = Const(s, -0.5, y.dtype());
      dx->push_back(Mul(s, dy[0], Mul(s, minus_half, Mul(s, Square(s, y), y))));
      return absl::OkStatus();
    });

}  // namespace

Output Rsqrt(const Scope& scope, Output x) {
  return scope.AddNode("Rsqrt", {x});
}

}  // namespace ipuflow::ops
