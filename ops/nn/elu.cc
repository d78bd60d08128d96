#include "ops/nn/elu.h"

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

absl::Status CheckAttrs(ShapeContext&) { return absl::OkStatus(); }

REGISTER_OP("Elu")
    .Input("x")
    .Attr("alpha", 1.0f)
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      RETURN_IF_ERROR(CheckAttrs(c));
      return shape_fns::UnchangedFloat(c);
    })
    .SetKernel([](KernelContext& ctx) {
      const float alpha = ctx.attr<float>("alpha");
      return PointwiseKernel(ctx, [alpha](float x) {
        return x > 0.0f ? x : static_cast<float>(alpha * std::expm1(double{x}));
      });
    })
    // y = x (x > 0), alpha (e^x - 1);  dy/dx = 1 (x > 0), alpha e^x
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      dx->push_back(EluGrad(s, op.input(0), dy[0], op.attr<float>("alpha")));
      return absl::OkStatus();
    });

REGISTER_OP("EluGrad")
    .Input("x")
    .Input("dy")
    .Attr("alpha", 1.0f)
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      RETURN_IF_ERROR(CheckAttrs(c));
      return shape_fns::SameShapeFloatPair(c);
    })
    .SetKernel([](KernelContext& ctx) {
      const float alpha = ctx.attr<float>("alpha");
      return PointwiseGradKernel(ctx, [alpha](float x, float dy) {
        // In float64: e^x is subnormal in float32 below -87.3.
        return x > 0.0f ? dy
                        : static_cast<float>(double{dy} * alpha *
                                             std::exp(double{x}));
      });
    })
    // Second derivatives: an error, not a silent zero.
    .SetGradient([](const Scope&, const Node& op, absl::Span<const Output>,
                    std::vector<Output>*) {
      return absl::UnimplementedError(
          absl::StrCat("second derivatives of Elu are not implemented (node '",
                       op.name(), "')"));
    });

}  // namespace

Output Elu(const Scope& scope, Output x, float alpha) {
  return scope.AddNode("Elu", {x}, {{"alpha", alpha}});
}

Output EluGrad(const Scope& scope, Output x, Output dy, float alpha) {
  return scope.AddNode("EluGrad", {x, dy}, {{"alpha", alpha}});
}

}  // namespace ipuflow::ops
