#include "ops/nn/softplus.h"

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

// beta is a finite non-zero divisor.
absl::Status CheckSoftplusAttrs(ShapeContext& c) {
  ASSIGN_OR_RETURN(float beta, c.attr<float>("beta"));
  if (beta == 0.0f || !std::isfinite(beta)) {
    return absl::InvalidArgumentError(
        absl::StrCat("beta must be finite and non-zero, got ", beta));
  }
  return absl::OkStatus();
}

REGISTER_OP("Softplus")
    .Input("x")
    .Attr("beta", 1.0f)
    .Attr("threshold", 20.0f)
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      RETURN_IF_ERROR(CheckSoftplusAttrs(c));
      return shape_fns::UnchangedFloat(c);
    })
    .SetKernel([](KernelContext& ctx) {
      const float beta = ctx.attr<float>("beta");
      const float threshold = ctx.attr<float>("threshold");
      return PointwiseKernel(ctx, [beta, threshold](float x) {
        // In float64, rounded once (e^(bx) leaves float32's range).
        const double bx = double{beta} * x;
        return bx > threshold
                   ? x
                   : static_cast<float>(std::log1p(std::exp(bx)) / beta);
      });
    })
    // y = log(1 + e^(bx)) / b;  dy/dx = sigmoid(bx) (1 beyond the threshold)
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      dx->push_back(SoftplusGrad(s, op.input(0), dy[0], op.attr<float>("beta"),
                                 op.attr<float>("threshold")));
      return absl::OkStatus();
    });

REGISTER_OP("SoftplusGrad")
    .Input("x")
    .Input("dy")
    .Attr("beta", 1.0f)
    .Attr("threshold", 20.0f)
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      RETURN_IF_ERROR(CheckSoftplusAttrs(c));
      return shape_fns::SameShapeFloatPair(c);
    })
    .SetKernel([](KernelContext& ctx) {
      const float beta = ctx.attr<float>("beta");
      const float threshold = ctx.attr<float>("threshold");
      return PointwiseGradKernel(ctx, [beta, threshold](float x, float dy) {
        const double bx = double{beta} * x;
        return bx > threshold ? dy
                              : static_cast<float>(dy / (1.0 + std::exp(-bx)));
      });
    })
    // Second derivatives: an error, not a silent zero.
    .SetGradient([](const Scope&, const Node& op, absl::Span<const Output>,
                    std::vector<Output>*) {
      return absl::UnimplementedError(absl::StrCat(
          "second derivatives of Softplus are not implemented (node '",
          op.name(), "')"));
    });

}  // namespace

Output Softplus(const Scope& scope, Output x, float beta, float threshold) {
  return scope.AddNode("Softplus", {x},
                       {{"beta", beta}, {"threshold", threshold}});
}

Output SoftplusGrad(const Scope& scope, Output x, Output dy, float beta,
                    float threshold) {
  return scope.AddNode("SoftplusGrad", {x, dy},
                       {{"beta", beta}, {"threshold", threshold}});
}

}  // namespace ipuflow::ops
