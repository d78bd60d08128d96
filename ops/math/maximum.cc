#include "ops/math/maximum.h"

#include "core/half.h"
#include "core/op_registry.h"
#include "ops/array/fill.h"
#include "ops/cwise.h"
#include "ops/math/broadcast_grad.h"
#include "ops/math/less.h"
#include "ops/math/scalar_ops.h"
#include "ops/math/select.h"
#include "ops/shape_fns.h"

namespace ipuflow::ops {
namespace {

struct MaximumFn {
  template <typename A, typename B>
  auto operator()(const A& a, const B& b) const {
    return a.binaryExpr(b, NanMax<typename A::Scalar>());
  }
};

REGISTER_OP("Maximum")
    .Input("x")
    .Input("y")
    .SetShapeFn(shape_fns::BroadcastBinary)
    .SetKernel([](KernelContext& ctx) -> absl::Status {
      IPUFLOW_SWITCH_NUMERIC(
          ctx.input(0).dtype(), return (BinaryKernel<T, T>(ctx, MaximumFn())),
          return UnsupportedDType(ctx, ctx.input(0).dtype()));
    })
    // z = max(x, y);  dz/dx = [x >= y];  dz/dy = [x < y] (ties go to x;
    // each summed over its broadcast dims)
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dz,
                    std::vector<Output>* dx) {
      const Output x = op.input(0), y = op.input(1);
      const Output to_y = Less(s, x, y);  // [x < y], the shape of dz.
      const Output zeros = ZerosLike(s, dz[0]);
      dx->push_back(ReduceGradTo(s, Select(s, to_y, zeros, dz[0]), x));
      dx->push_back(ReduceGradTo(s, Select(s, to_y, dz[0], zeros), y));
      return absl::OkStatus();
    });

}  // namespace

Output Maximum(const Scope& scope, Output x, Output y) {
  return scope.AddNode("Maximum", {x, y});
}

}  // namespace ipuflow::ops
