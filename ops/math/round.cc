#include "ops/math/round.h"

#include <cmath>

#include "core/op_registry.h"
#include "ops/array/fill.h"
#include "ops/cwise.h"
#include "ops/shape_fns.h"

namespace ipuflow::ops {
namespace {

REGISTER_OP("Round")
    .Input("x")
    .SetShapeFn(shape_fns::UnchangedFloat)
    .SetKernel([](KernelContext& ctx) {
      return PointwiseKernel(ctx, [](float x) { return std::nearbyint(x); });
    })
    // y = round(x);  dy/dx = 0 (almost everywhere)
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      dx->push_back(ZerosLike(s, op.input(0)));
      return absl::OkStatus();
    });

}  // namespace

Output Round(const Scope& scope, Output x) {
  return scope.AddNode("Round", {x});
}

}  // namespace ipuflow::ops
