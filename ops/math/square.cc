#include "ops/math/square.h"

#include "absl/strings/str_cat.h"
#include "core/half.h"
#include "core/op_registry.h"
#include "ops/array/const.h"
#include "ops/cwise.h"
#include "ops/math/mul.h"
#include "ops/shape_fns.h"

namespace ipuflow::ops {
namespace {

REGISTER_OP("Square")
    .Input("x")
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      const DType dt = c.input_dtype(0);
      if (dt == DType::kBool || dt == DType::kResource) {
        return absl::InvalidArgumentError(
            absl::StrCat(c.InputName(0), " is ", DTypeName(dt),
                         "; expected a numeric type"));
      }
      return shape_fns::Unchanged(c);
    })
    .SetKernel([](KernelContext& ctx) -> absl::Status {
      IPUFLOW_SWITCH_NUMERIC(
          ctx.input(0).dtype(),
          return UnaryKernel<T>(ctx, [](const auto& a) { return a.square(); }),
          return UnsupportedDType(ctx, ctx.input(0).dtype()));
    })
    // y = x^2;  dy/dx = 2x
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      const Output x = op.input(0);
      dx->push_back(Mul(s, dy[0], Mul(s, Const(s, 2.0, x.dtype()), x)));
      return absl::OkStatus();
    });

}  // namespace

Output Square(const Scope& scope, Output x) {
  return scope.AddNode("Square", {x});
}

}  // namespace ipuflow::ops
