#include "ops/math/neg.h"

#include "absl/strings/str_cat.h"
#include "core/half.h"
#include "core/op_registry.h"
#include "ops/cwise.h"
#include "ops/shape_fns.h"

namespace ipuflow::ops {
namespace {

REGISTER_OP("Neg")
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
          return UnaryKernel<T>(ctx, [](const auto& a) { return -a; }),
          return UnsupportedDType(ctx, ctx.input(0).dtype()));
    })
    // y = -x;  dy/dx = -1
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      dx->push_back(Neg(s, dy[0]));
      return absl::OkStatus();
    });

}  // namespace

Output Neg(const Scope& scope, Output x) { return scope.AddNode("Neg", {x}); }

}  // namespace ipuflow::ops
