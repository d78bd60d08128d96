#include "ops/math/log.h"

#include "core/op_registry.h"
#include "ops/cwise.h"
#include "ops/math/div.h"
#include "ops/math/vector_math.h"
#include "ops/shape_fns.h"

namespace ipuflow::ops {
namespace {

REGISTER_OP("Log")
    .Input("x")
    .SetShapeFn(shape_fns::UnchangedFloat)
    .SetKernel([](KernelContext& ctx) { return UnaryArrayKernel(ctx, VecLog); })
    // y = ln(x);  dy/dx = 1 / x
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      dx->push_back(Div(s, dy[0], op.input(0)));
      return absl::OkStatus();
    });

}  // namespace

Output Log(const Scope& scope, Output x) { return scope.AddNode("Log", {x}); }

}  // namespace ipuflow::ops
