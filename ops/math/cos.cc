#include "ops/math/cos.h"

#include <cmath>

#include "core/op_registry.h"
#include "ops/cwise.h"
#include "ops/math/mul.h"
#include "ops/math/neg.h"
#include "ops/math/sin.h"
#include "ops/shape_fns.h"

namespace ipuflow::ops {
namespace {

REGISTER_OP("Cos")
    .Input("x")
    .SetShapeFn(shape_fns::UnchangedFloat)
    .SetKernel([](KernelContext& ctx) {
      return PointwiseKernel(ctx, [](float x) { return std::cos(x); });
    })
    // y = cos(x);  dy/dx = -sin(x)
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      dx->push_back(Neg(s, Mul(s, dy[0], Sin(s, op.input(0)))));
      return absl::OkStatus();
    });

}  // namespace

Output Cos(const Scope& scope, Output x) { return scope.AddNode("Cos", {x}); }

}  // namespace ipuflow::ops
