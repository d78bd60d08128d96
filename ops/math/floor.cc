#include "ops/math/floor.h"

#include <cmath>

#include "core/op_registry.h"
#include "ops/array/fill.h"
#include "ops/cwise.h"
#include "ops/shape_fns.h"

namespace ipuflow::ops {
namespace {

REGISTER_OP("Floor")
    .Input("x")
    .SetShapeFn(shape_fns::UnchangedFloat)
    .SetKernel([](KernelContext& ctx) {
      return PointwiseKernel(ctx, [](float x) { return std::floor(x); });
    })
    // y = floor(x);  dy/dx = 0 (almost everywhere)
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      dx->push_back(ZerosLike(s, op.input(0)));
      return absl::OkStatus();
    });

}  // namespace

Output Floor(const Scope& scope, Output x) {
  return scope.AddNode("Floor", {x});
}

}  // namespace ipuflow::ops
