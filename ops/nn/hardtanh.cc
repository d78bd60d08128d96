#include "ops/nn/hardtanh.h"

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

// min_val <= max_val (PyTorch's check).
absl::Status CheckHardtanhAttrs(ShapeContext& c) {
  ASSIGN_OR_RETURN(float lo, c.attr<float>("min_val"));
  ASSIGN_OR_RETURN(float hi, c.attr<float>("max_val"));
  if (!(lo <= hi)) {
    return absl::InvalidArgumentError(
        absl::StrCat("min_val ", lo, " must not exceed max_val ", hi));
  }
  return absl::OkStatus();
}

REGISTER_OP("Hardtanh")
    .Input("x")
    .Attr("min_val", -1.0f)
    .Attr("max_val", 1.0f)
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      RETURN_IF_ERROR(CheckHardtanhAttrs(c));
      return shape_fns::UnchangedFloat(c);
    })
    .SetKernel([](KernelContext& ctx) {
      const float min_val = ctx.attr<float>("min_val");
      const float max_val = ctx.attr<float>("max_val");
      return PointwiseKernel(ctx, [min_val, max_val](float x) {
        return std::min(std::max(x, min_val), max_val);
      });
    })
    // y = clamp(x);  dy/dx = 1 strictly inside (min_val, max_val), 0 outside
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      dx->push_back(HardtanhGrad(s, op.input(0), dy[0],
                                 op.attr<float>("min_val"),
                                 op.attr<float>("max_val")));
      return absl::OkStatus();
    });

REGISTER_OP("HardtanhGrad")
    .Input("x")
    .Input("dy")
    .Attr("min_val", -1.0f)
    .Attr("max_val", 1.0f)
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      RETURN_IF_ERROR(CheckHardtanhAttrs(c));
      return shape_fns::SameShapeFloatPair(c);
    })
    .SetKernel([](KernelContext& ctx) {
      const float min_val = ctx.attr<float>("min_val");
      const float max_val = ctx.attr<float>("max_val");
      return PointwiseGradKernel(ctx, [min_val, max_val](float x, float dy) {
        return x > min_val && x < max_val ? dy : 0.0f;
      });
    })
    // dx = g(x) dy is linear in dy and piecewise constant in x:
    //   d/dx = 0;  d/d(dy) = HardtanhGrad(x, g)
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> g,
                    std::vector<Output>* dx) {
      dx->push_back(ZerosLike(s, op.input(0)));
      dx->push_back(HardtanhGrad(s, op.input(0), g[0],
                                 op.attr<float>("min_val"),
                                 op.attr<float>("max_val")));
      return absl::OkStatus();
    });

}  // namespace

Output Hardtanh(const Scope& scope, Output x, float min_val, float max_val) {
  return scope.AddNode("Hardtanh", {x},
                       {{"min_val", min_val}, {"max_val", max_val}});
}

Output Relu6(const Scope& scope, Output x) {
  return Hardtanh(scope, x, 0.0f, 6.0f);
}

Output HardtanhGrad(const Scope& scope, Output x, Output dy, float min_val,
                    float max_val) {
  return scope.AddNode("HardtanhGrad", {x, dy},
                       {{"min_val", min_val}, {"max_val", max_val}});
}

}  // namespace ipuflow::ops
