#include "ops/math/erf.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/op_registry.h"
#include "ops/array/const.h"
#include "ops/cwise.h"
#include "ops/math/mul.h"
#include "ops/shape_fns.h"

namespace ipuflow::ops {
namespace {

// 2/sqrt(pi). The gradient is computed in double and rounded once to
// float32: e^(-x^2) in float32 is off by up to 2x^2 units (18 at |x| = 3)
// from the rounding of -x^2 alone. (A float16 constant was 2 float16
// units off at x = -2.5.)
constexpr double kTwoOverSqrtPi = 1.1283791670955126;

REGISTER_OP("Erf")
    .Input("x")
    .SetShapeFn(shape_fns::UnchangedFloat)
    .SetKernel([](KernelContext& ctx) {
      return PointwiseKernel(ctx, [](float x) { return std::erf(x); });
    })
    // y = erf(x);  dy/dx = 2/sqrt(pi) e^(-x^2), one ErfGrad op computed in
    // float32 (or wider) and rounded once for float16, as the other
    // element-wise gradients (TensorFlow IPU guide, "Half-precision floating
    // point").
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      dx->push_back(ErfGrad(s, op.input(0), dy[0]));
      return absl::OkStatus();
    });

REGISTER_OP("ErfGrad")
    .Input("x")
    .Input("dy")
    .SetShapeFn(shape_fns::SameShapeFloatPair)
    .SetKernel([](KernelContext& ctx) {
      return PointwiseGradKernel(ctx, [](float x, float dy) {
        const double xd = x;
        return static_cast<float>(dy * (kTwoOverSqrtPi * std::exp(-xd * xd)));
      });
    })
    // z = dy c e^(-x^2), linear in dy:
    //   dz/dx = -2x z  (so d/dx = ErfGrad(x, g dy) * -2x);
    //   dz/d(dy) = c e^(-x^2)  (so d/d(dy) = ErfGrad(x, g)).
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> g,
                    std::vector<Output>* dx) {
      const Output x = op.input(0);
      dx->push_back(Mul(s, ErfGrad(s, x, Mul(s, g[0], op.input(1))),
                        Mul(s, Const(s, -2.0, x.dtype()), x)));
      dx->push_back(ErfGrad(s, x, g[0]));
      return absl::OkStatus();
    });

}  // namespace

Output Erf(const Scope& scope, Output x) { return scope.AddNode("Erf", {x}); }

Output ErfGrad(const Scope& scope, Output x, Output dy) {
  return scope.AddNode("ErfGrad", {x, dy});
}

}  // namespace ipuflow::ops
