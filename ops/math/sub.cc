#include "ops/math/sub.h"

#include "core/half.h"
#include "core/op_registry.h"
#include "ops/cwise.h"
#include "ops/math/broadcast_grad.h"
#include "ops/math/half_binary.h"
#include "ops/math/neg.h"
#include "ops/shape_fns.h"

namespace ipuflow::ops {
namespace {

struct SubFn {
  template <typename A, typename B>
  auto operator()(const A& a, const B& b) const {
    return a - b;
  }
};

REGISTER_OP("Sub")
    .Input("x")
    .Input("y")
    .SetShapeFn(shape_fns::BroadcastBinary)
    .SetKernel([](KernelContext& ctx) -> absl::Status {
      if (ctx.input(0).dtype() == DType::kFloat16) {
        return HalfBinaryKernel(ctx, SubFn());
      }
      IPUFLOW_SWITCH_NUMERIC(
          ctx.input(0).dtype(), return (BinaryKernel<T, T>(ctx, SubFn())),
          return UnsupportedDType(ctx, ctx.input(0).dtype()));
    })
    // z = x - y;  dz/dx = 1;  dz/dy = -1 (each summed over its broadcast dims)
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dz,
                    std::vector<Output>* dx) {
      dx->push_back(ReduceGradTo(s, dz[0], op.input(0)));
      dx->push_back(ReduceGradTo(s, Neg(s, dz[0]), op.input(1)));
      return absl::OkStatus();
    });

}  // namespace

Output Sub(const Scope& scope, Output x, Output y) {
  return scope.AddNode("Sub", {x, y});
}

}  // namespace ipuflow::ops
