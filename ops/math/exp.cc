#include "ops/math/exp.h"

#include "core/op_registry.h"
#include "ops/cwise.h"
#include "ops/math/broadcast_grad.h"
#include "ops/math/mul.h"
#include "ops/math/vector_math.h"
#include "ops/shape_fns.h"

namespace ipuflow::ops {
namespace {

REGISTER_OP("Exp")
    .Input("x")
    .SetShapeFn(shape_fns::UnchangedFloat)
    .SetKernel([](KernelContext& ctx) { return UnaryArrayKernel(ctx, VecExp); })
    // y = e^x;  dy/dx = e^x = y
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      dx->push_back(Mul(s, dy[0], OutputOf(op)));
      return absl::OkStatus();
    });

}  // namespace

Output Exp(const Scope& scope, Output x) { return scope.AddNode("Exp", {x}); }

}  // namespace ipuflow::ops
