#include "ops/math/erf.h"

#include <cmath>

#include "core/op_registry.h"
#include "ops/array/const.h"
#include "ops/cwise.h"
#include "ops/math/exp.h"
#include "ops/math/mul.h"
#include "ops/math/neg.h"
#include "ops/math/square.h"
#include "ops/shape_fns.h"

namespace ipuflow::ops {
namespace {

REGISTER_OP("Erf")
    .Input("x")
    .SetShapeFn(shape_fns::UnchangedFloat)
    .SetKernel([](KernelContext& ctx) {
      return PointwiseKernel(ctx, [](float x) { return std::erf(x); });
    })
    // y = erf(x);  dy/dx = 2/sqrt(pi) e^(-x^2)
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      const Output x = op.input(0);
      const Output c = Const(s, 1.1283791670955126, x.dtype());
      dx->push_back(Mul(s, dy[0], Mul(s, c, Exp(s, Neg(s, Square(s, x))))));
      return absl::OkStatus();
    });

}  // namespace

Output Erf(const Scope& scope, Output x) { return scope.AddNode("Erf", {x}); }

}  // namespace ipuflow::ops
