#include "ops/nn/hard_sigmoid.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/op_registry.h"
#include "ops/array/fill.h"
#include "ops/cwise.h"
#include "ops/nn/elementwise_grad.h"
#include "ops/shape_fns.h"

namespace ipuflow::ops {
namespace {

absl::Status CheckHardSigmoidAttrs(ShapeContext&) { return absl::OkStatus(); }

REGISTER_OP("HardSigmoid")
    .Input("x")
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      RETURN_IF_ERROR(CheckHardSigmoidAttrs(c));
      return shape_fns::UnchangedFloat(c);
    })
    .SetKernel([](KernelContext& ctx) {
      return PointwiseKernel(ctx, [](float x) {
        return x <= -3.0f ? 0.0f : (x >= 3.0f ? 1.0f : (x + 3.0f) / 6.0f);
      });
    })
    // y = x/6 + 1/2 on (-3, 3);  dy/dx = 1/6 there, 0 outside
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      dx->push_back(HardSigmoidGrad(s, op.input(0), dy[0]));
      return absl::OkStatus();
    });

REGISTER_OP("HardSigmoidGrad")
    .Input("x")
    .Input("dy")
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      RETURN_IF_ERROR(CheckHardSigmoidAttrs(c));
      return shape_fns::SameShapeFloatPair(c);
    })
    .SetKernel([](KernelContext& ctx) {
      return PointwiseGradKernel(ctx, [](float x, float dy) {
        return x > -3.0f && x < 3.0f ? dy / 6.0f : 0.0f;
      });
    })
    // dx = g(x) dy is linear in dy and piecewise constant in x:
    //   d/dx = 0;  d/d(dy) = HardSigmoidGrad(x, g)
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> g,
                    std::vector<Output>* dx) {
      dx->push_back(ZerosLike(s, op.input(0)));
      dx->push_back(HardSigmoidGrad(s, op.input(0), g[0]));
      return absl::OkStatus();
    });

}  // namespace

Output HardSigmoid(const Scope& scope, Output x) {
  return scope.AddNode("HardSigmoid", {x});
}

Output HardSigmoidGrad(const Scope& scope, Output x, Output dy) {
  return scope.AddNode("HardSigmoidGrad", {x, dy});
}

}  // namespace ipuflow::ops
