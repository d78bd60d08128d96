#include "ops/math/div.h"

#include <type_traits>

#include "core/op_registry.h"
#include "core/tensor_eigen.h"
#include "ops/cwise.h"
#include "ops/math/broadcast_grad.h"
#include "ops/math/mul.h"
#include "ops/math/neg.h"
#include "ops/shape_fns.h"

namespace ipuflow::ops {
namespace {

// C division that wraps INT_MIN / -1 instead of trapping. REQUIRES: y != 0.
template <typename T>
T IntDiv(T x, T y) {
  if (y == -1)
    return static_cast<T>(0 - static_cast<std::make_unsigned_t<T>>(x));
  return x / y;
}

struct DivFn {
  template <typename A, typename B>
  auto operator()(const A& a, const B& b) const {
    using T = typename A::Scalar;
    if constexpr (std::is_integral_v<T>) {
      return a.binaryExpr(b, [](T x, T y) { return IntDiv(x, y); });
    } else {
      return a / b;
    }
  }
};

template <typename T>
absl::Status DivKernel(KernelContext& ctx) {
  if constexpr (std::is_integral_v<T>) {
    // Checked up front: a zero divisor would trap inside the kernel.
    if ((ctx.input(1).flat<T>() == T(0)).any()) {
      return ctx.InvalidArgument("integer division by zero (input 'y' ",
                                 ctx.input(1).shape().DebugString(),
                                 " has a zero element)");
    }
  }
  return BinaryKernel<T, T>(ctx, DivFn());
}

REGISTER_OP("Div")
    .Input("x")
    .Input("y")
    .SetDivisorInput(1)  // A zero in y is the div0 trap's (floating_point.h).
    .SetShapeFn(shape_fns::BroadcastBinary)
    .SetKernel([](KernelContext& ctx) -> absl::Status {
      IPUFLOW_SWITCH_NUMERIC(
          ctx.input(0).dtype(), return DivKernel<T>(ctx),
          return UnsupportedDType(ctx, ctx.input(0).dtype()));
    })
    // z = x / y;  dz/dx = 1 / y;  dz/dy = -x / y^2 = -z / y
    // (each summed over its broadcast dims)
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dz,
                    std::vector<Output>* dx) {
      const Output y = op.input(1);
      dx->push_back(ReduceGradTo(s, Div(s, dz[0], y), op.input(0)));
      dx->push_back(
          ReduceGradTo(s, Neg(s, Div(s, Mul(s, dz[0], OutputOf(op)), y)), y));
      return absl::OkStatus();
    });

}  // namespace

Output Div(const Scope& scope, Output x, Output y) {
  return scope.AddNode("Div", {x, y});
}

}  // namespace ipuflow::ops
