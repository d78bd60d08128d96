#include "ops/math/expm1.h"

#include <cmath>

#include "core/op_registry.h"
#include "ops/cwise.h"
#include "ops/math/exp.h"
#include "ops/math/mul.h"
#include "ops/shape_fns.h"

namespace ipuflow::ops {
namespace {

REGISTER_OP("Expm1")
    .Input("x")
    .SetShapeFn(shape_fns::UnchangedFloat)
    .SetKernel([](KernelContext& ctx) {
      return PointwiseKernel(ctx, [](float x) { return std::expm1(x); });
    })
    // y = e^x - 1;  dy/dx = e^x
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      dx->push_back(Mul(s, dy[0], Exp(s, op.input(0))));
      return absl::OkStatus();
    });

}  // namespace

Output Expm1(const Scope& scope, Output x) {
  return scope.AddNode("Expm1", {x});
}

}  // namespace ipuflow::ops
