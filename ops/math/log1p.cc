#include "ops/math/log1p.h"

#include <cmath>

#include "core/op_registry.h"
#include "ops/array/fill.h"
#include "ops/cwise.h"
#include "ops/math/add.h"
#include "ops/math/div.h"
#include "ops/shape_fns.h"

namespace ipuflow::ops {
namespace {

REGISTER_OP("Log1p")
    .Input("x")
    .SetShapeFn(shape_fns::UnchangedFloat)
    .SetKernel([](KernelContext& ctx) {
      return PointwiseKernel(ctx, [](float x) { return std::log1p(x); });
    })
    // y = ln(1 + x);  dy/dx = 1 / (1 + x)
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      const Output x = op.input(0);
      dx->push_back(Div(s, dy[0], Add(s, x, OnesLike(s, x))));
      return absl::OkStatus();
    });

}  // namespace

Output Log1p(const Scope& scope, Output x) {
  return scope.AddNode("Log1p", {x});
}

}  // namespace ipuflow::ops
