#include "ops/math/sign.h"

#include <cmath>

#include "core/op_registry.h"
#include "ops/array/fill.h"
#include "ops/cwise.h"
#include "ops/shape_fns.h"

namespace ipuflow::ops {
namespace {

REGISTER_OP("Sign")
    .Input("x")
    .SetShapeFn(shape_fns::UnchangedFloat)
    .SetKernel([](KernelContext& ctx) {
      return PointwiseKernel(ctx, [](float x) {
        return x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : x);
      });
    })
    // y = sign(x);  dy/dx = 0 (almost everywhere)
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      dx->push_back(ZerosLike(s, op.input(0)));
      return absl::OkStatus();
    });

}  // namespace

Output Sign(const Scope& scope, Output x) { return scope.AddNode("Sign", {x}); }

}  // namespace ipuflow::ops
