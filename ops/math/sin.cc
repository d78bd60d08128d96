#include "ops/math/sin.h"

#include <cmath>

#include "core/op_registry.h"
#include "ops/cwise.h"
#include "ops/math/cos.h"
#include "ops/math/mul.h"
#include "ops/shape_fns.h"

namespace ipuflow::ops {
namespace {

REGISTER_OP("Sin")
    .Input("x")
    .SetShapeFn(shape_fns::UnchangedFloat)
    .SetKernel([](KernelContext& ctx) {
      return PointwiseKernel(ctx, [](float x) { return std::sin(x); });
    })
    // y = sin(x);  dy/dx = cos(x)
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      dx->push_back(Mul(s, dy[0], Cos(s, op.input(0))));
      return absl::OkStatus();
    });

}  // namespace

Output Sin(const Scope& scope, Output x) { return scope.AddNode("Sin", {x}); }

}  // namespace ipuflow::ops
