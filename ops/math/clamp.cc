#include "ops/math/clamp.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/op_registry.h"
#include "ops/array/fill.h"
#include "ops/cwise.h"
#include "ops/shape_fns.h"

namespace ipuflow::ops {
namespace {

// min <= max (torch.clamp's check).
absl::Status CheckAttrs(ShapeContext& c) {
  ASSIGN_OR_RETURN(float lo, c.attr<float>("min"));
  ASSIGN_OR_RETURN(float hi, c.attr<float>("max"));
  if (!(lo <= hi)) {
    return absl::InvalidArgumentError(
        absl::StrCat("min ", lo, " must not exceed max ", hi));
  }
  return absl::OkStatus();
}

REGISTER_OP("Clamp")
    .Input("x")
    .RequiredAttr("min", AttrType::kFloat)
    .RequiredAttr("max", AttrType::kFloat)
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      RETURN_IF_ERROR(CheckAttrs(c));
      return shape_fns::UnchangedFloat(c);
    })
    .SetKernel([](KernelContext& ctx) {
      const float min = ctx.attr<float>("min");
      const float max = ctx.attr<float>("max");
      return PointwiseKernel(
          ctx, [min, max](float x) { return std::min(std::max(x, min), max); });
    })
    // y = clamp(x);  dy/dx = 1 on [min, max] (bounds included), 0 outside
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      dx->push_back(ClampGrad(s, op.input(0), dy[0], op.attr<float>("min"),
                              op.attr<float>("max")));
      return absl::OkStatus();
    });

REGISTER_OP("ClampGrad")
    .Input("x")
    .Input("dy")
    .RequiredAttr("min", AttrType::kFloat)
    .RequiredAttr("max", AttrType::kFloat)
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      RETURN_IF_ERROR(CheckAttrs(c));
      return shape_fns::SameShapeFloatPair(c);
    })
    .SetKernel([](KernelContext& ctx) {
      const float min = ctx.attr<float>("min");
      const float max = ctx.attr<float>("max");
      return PointwiseGradKernel(ctx, [min, max](float x, float dy) {
        return x >= min && x <= max ? dy : 0.0f;
      });
    })
    // dx = g(x) dy is linear in dy and piecewise constant in x:
    //   d/dx = 0;  d/d(dy) = ClampGrad(x, g)
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> g,
                    std::vector<Output>* dx) {
      dx->push_back(ZerosLike(s, op.input(0)));
      dx->push_back(ClampGrad(s, op.input(0), g[0], op.attr<float>("min"),
                              op.attr<float>("max")));
      return absl::OkStatus();
    });

}  // namespace

Output Clamp(const Scope& scope, Output x, float min, float max) {
  return scope.AddNode("Clamp", {x}, {{"min", min}, {"max", max}});
}

Output ClampGrad(const Scope& scope, Output x, Output dy, float min,
                 float max) {
  return scope.AddNode("ClampGrad", {x, dy}, {{"min", min}, {"max", max}});
}

}  // namespace ipuflow::ops
