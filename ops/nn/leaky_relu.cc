#include "ops/nn/leaky_relu.h"

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

absl::Status CheckLeakyReluAttrs(ShapeContext&) { return absl::OkStatus(); }

REGISTER_OP("LeakyRelu")
    .Input("x")
    .Attr("alpha", 0.2f)
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      RETURN_IF_ERROR(CheckLeakyReluAttrs(c));
      return shape_fns::UnchangedFloat(c);
    })
    .SetKernel([](KernelContext& ctx) {
      const float alpha = ctx.attr<float>("alpha");
      return PointwiseKernel(
          ctx, [alpha](float x) { return x > 0.0f ? x : alpha * x; });
    })
    // y = x (x > 0), alpha x;  dy/dx = 1 (x > 0), alpha
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      dx->push_back(
          LeakyReluGrad(s, op.input(0), dy[0], op.attr<float>("alpha")));
      return absl::OkStatus();
    });

REGISTER_OP("LeakyReluGrad")
    .Input("x")
    .Input("dy")
    .Attr("alpha", 0.2f)
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      RETURN_IF_ERROR(CheckLeakyReluAttrs(c));
      return shape_fns::SameShapeFloatPair(c);
    })
    .SetKernel([](KernelContext& ctx) {
      const float alpha = ctx.attr<float>("alpha");
      return PointwiseGradKernel(ctx, [alpha](float x, float dy) {
        return x > 0.0f ? dy : alpha * dy;
      });
    })
    // dx = g(x) dy is linear in dy and piecewise constant in x:
    //   d/dx = 0;  d/d(dy) = LeakyReluGrad(x, g)
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> g,
                    std::vector<Output>* dx) {
      dx->push_back(ZerosLike(s, op.input(0)));
      dx->push_back(
          LeakyReluGrad(s, op.input(0), g[0], op.attr<float>("alpha")));
      return absl::OkStatus();
    });

}  // namespace

Output LeakyRelu(const Scope& scope, Output x, float alpha) {
  return scope.AddNode("LeakyRelu", {x}, {{"alpha", alpha}});
}

Output LeakyReluGrad(const Scope& scope, Output x, Output dy, float alpha) {
  return scope.AddNode("LeakyReluGrad", {x, dy}, {{"alpha", alpha}});
}

}  // namespace ipuflow::ops
