#include "ops/math/mul.h"

#include "core/half.h"
#include "core/op_registry.h"
#include "ops/cwise.h"
#include "ops/math/broadcast_grad.h"
#include "ops/math/half_binary.h"
#include "ops/shape_fns.h"

namespace ipuflow::ops {
namespace {

struct MulFn {
  template <typename A, typename B>
  auto operator()(const A& a, const B& b) const {
    return a * b;
  }
};

REGISTER_OP("Mul")
    .Input("x")
    .Input("y")
    .SetShapeFn(shape_fns::BroadcastBinary)
    .SetKernel([](KernelContext& ctx) -> absl::Status {
      if (ctx.input(0).dtype() == DType::kFloat16) {
        return HalfBinaryKernel(ctx, MulFn());
      }
      IPUFLOW_SWITCH_NUMERIC(
          ctx.input(0).dtype(), return (BinaryKernel<T, T>(ctx, MulFn())),
          return UnsupportedDType(ctx, ctx.input(0).dtype()));
    })
    // z = x * y;  dz/dx = y;  dz/dy = x (each summed over its broadcast dims)
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dz,
                    std::vector<Output>* dx) {
      const Output x = op.input(0), y = op.input(1);
      dx->push_back(ReduceGradTo(s, Mul(s, dz[0], y), x));
      dx->push_back(ReduceGradTo(s, Mul(s, x, dz[0]), y));
      return absl::OkStatus();
    });

}  // namespace

Output Mul(const Scope& scope, Output x, Output y) {
  return scope.AddNode("Mul", {x, y});
}

}  // namespace ipuflow::ops
