#include "ops/nn/gelu.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/op_registry.h"
#include "ops/cwise.h"
#include "ops/nn/elementwise_grad.h"
#include "ops/shape_fns.h"

namespace ipuflow::ops {
namespace {

constexpr double kSqrtHalf = 0.70710678118654752;     // 1 / sqrt(2)
constexpr double kInvSqrt2Pi = 0.39894228040143268;   // 1 / sqrt(2 pi)
constexpr double kSqrt2OverPi = 0.79788456080286536;  // sqrt(2 / pi)
constexpr double kCubic = 0.044715;

absl::Status CheckApproximate(ShapeContext& c) {
  ASSIGN_OR_RETURN(std::string a, c.attr<std::string>("approximate"));
  if (a != "none" && a != "tanh") {
    return absl::InvalidArgumentError(absl::StrCat(
        "approximate must be \"none\" or \"tanh\", got \"", a, "\""));
  }
  return absl::OkStatus();
}

bool IsTanh(const KernelContext& ctx) {
  return ctx.attr<std::string>("approximate") == "tanh";
}

// Each in float64, rounded once: erfc's argument and the tails stay
// exact where float32 arithmetic would lose digits (x Phi(x) has a
// condition number of about x^2).
float GeluErf(double x) {
  return static_cast<float>(0.5 * x * std::erfc(-x * kSqrtHalf));
}

float GeluErfGrad(double x, double dy) {
  const double cdf = 0.5 * std::erfc(-x * kSqrtHalf);
  const double pdf = kInvSqrt2Pi * std::exp(-0.5 * x * x);
  return static_cast<float>(dy * (cdf + x * pdf));
}

// x sigmoid(2u): 1 + tanh(u) = 2 / (1 + e^(-2u)).
float GeluTanh(double x) {
  const double u = kSqrt2OverPi * (x + kCubic * x * x * x);
  return static_cast<float>(x / (1.0 + std::exp(-2.0 * u)));
}

// y = x s, s = sigmoid(2u):  dy/dx = s + x s (1 - s) 2 du/dx.
float GeluTanhGrad(double x, double dy) {
  const double u = kSqrt2OverPi * (x + kCubic * x * x * x);
  const double s = 1.0 / (1.0 + std::exp(-2.0 * u));
  const double du = kSqrt2OverPi * (1.0 + 3.0 * kCubic * x * x);
  return static_cast<float>(dy * (s + 2.0 * x * s * (1.0 - s) * du));
}

REGISTER_OP("Gelu")
    .Input("x")
    .Attr("approximate", "none")
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      RETURN_IF_ERROR(CheckApproximate(c));
      return shape_fns::UnchangedFloat(c);
    })
    .SetKernel([](KernelContext& ctx) {
      return IsTanh(ctx)
                 ? PointwiseKernel(ctx, [](float x) { return GeluTanh(x); })
                 : PointwiseKernel(ctx, [](float x) { return GeluErf(x); });
    })
    // y = x Phi(x);  dy/dx = Phi(x) + x phi(x)  (or the tanh form's)
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      dx->push_back(
          GeluGrad(s, op.input(0), dy[0], op.attr<std::string>("approximate")));
      return absl::OkStatus();
    });

REGISTER_OP("GeluGrad")
    .Input("x")
    .Input("dy")
    .Attr("approximate", "none")
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      RETURN_IF_ERROR(CheckApproximate(c));
      return shape_fns::SameShapeFloatPair(c);
    })
    .SetKernel([](KernelContext& ctx) {
      return IsTanh(ctx) ? PointwiseGradKernel(ctx,
                                               [](float x, float dy) {
                                                 return GeluTanhGrad(x, dy);
                                               })
                         : PointwiseGradKernel(ctx, [](float x, float dy) {
                             return GeluErfGrad(x, dy);
                           });
    })
    // Second derivatives: an error, not a silent zero.
    .SetGradient([](const Scope&, const Node& op, absl::Span<const Output>,
                    std::vector<Output>*) {
      return absl::UnimplementedError(
          absl::StrCat("second derivatives of Gelu are not implemented (node '",
                       op.name(), "')"));
    });

}  // namespace

Output Gelu(const Scope& scope, Output x, const std::string& approximate) {
  return scope.AddNode("Gelu", {x}, {{"approximate", approximate}});
}

Output GeluGrad(const Scope& scope, Output x, Output dy,
                const std::string& approximate) {
  return scope.AddNode("GeluGrad", {x, dy}, {{"approximate", approximate}});
}

}  // namespace ipuflow::ops
