#include "ops/nn/silu.h"

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

absl::Status CheckSiluAttrs(ShapeContext&) { return absl::OkStatus(); }

// In float64, rounded once: float32's e^-x overflows for x < -88.7 and
// its sigmoid underflows for x < -87, where x sigmoid(x) is still a
// (subnormal) float32.
double Sigmoid64(double x) { return 1.0 / (1.0 + std::exp(-x)); }
float Silu64(double x) { return static_cast<float>(x * Sigmoid64(x)); }

REGISTER_OP("Silu")
    .Input("x")
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      RETURN_IF_ERROR(CheckSiluAttrs(c));
      return shape_fns::UnchangedFloat(c);
    })
    .SetKernel([](KernelContext& ctx) {
      return PointwiseKernel(ctx, [](float x) { return Silu64(x); });
    })
    // y = x s, s = sigmoid(x);  dy/dx = s (1 + x (1 - s))
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      dx->push_back(SiluGrad(s, op.input(0), dy[0]));
      return absl::OkStatus();
    });

REGISTER_OP("SiluGrad")
    .Input("x")
    .Input("dy")
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      RETURN_IF_ERROR(CheckSiluAttrs(c));
      return shape_fns::SameShapeFloatPair(c);
    })
    .SetKernel([](KernelContext& ctx) {
      return PointwiseGradKernel(ctx, [](float x, float dy) {
        const double s = Sigmoid64(x);
        return static_cast<float>(dy * s * (1.0 + x * (1.0 - s)));
      });
    })
    // Second derivatives: an error, not a silent zero.
    .SetGradient([](const Scope&, const Node& op, absl::Span<const Output>,
                    std::vector<Output>*) {
      return absl::UnimplementedError(
          absl::StrCat("second derivatives of Silu are not implemented (node '",
                       op.name(), "')"));
    });

}  // namespace

Output Silu(const Scope& scope, Output x) { return scope.AddNode("Silu", {x}); }

Output SiluGrad(const Scope& scope, Output x, Output dy) {
  return scope.AddNode("SiluGrad", {x, dy});
}

}  // namespace ipuflow::ops
