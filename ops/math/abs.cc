#include "ops/math/abs.h"

#include <cmath>

#include "core/op_registry.h"
#include "ops/cwise.h"
#include "ops/math/mul.h"
#include "ops/math/sign.h"
#include "ops/shape_fns.h"

namespace ipuflow::ops {
namespace {

REGISTER_OP("Abs")
    .Input("x")
    .SetShapeFn(shape_fns::UnchangedFloat)
    .SetKernel([](KernelContext& ctx) {
      return PointwiseKernel(ctx, [](float x) { return std::fabs(x); });
    })
    // y = |x|;  dy/dx = sign(x), 0 at 0
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      dx->push_back(Mul(s, dy[0], Sign(s, op.input(0))));
      return absl::OkStatus();
    });

}  // namespace

Output Abs(const Scope& scope, Output x) { return scope.AddNode("Abs", {x}); }

}  // namespace ipuflow::ops
