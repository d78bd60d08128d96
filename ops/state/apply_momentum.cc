#include "ops/state/apply_momentum.h"

#include "core/op_registry.h"
#include "ops/state/apply_util.h"
#include "ops/state/handle.h"

namespace ipuflow::ops {
namespace {

enum Input { kVar, kAccum, kLr, kGrad, kMomentum };

template <typename T>
absl::Status Momentum(KernelContext& ctx, VariableResource* var,
                      VariableResource* accum) {
  const float lr = ScalarInput(ctx, kLr);
  const float mu = ScalarInput(ctx, kMomentum);
  const bool nesterov = ctx.attr<bool>("use_nesterov");
  const Tensor& grad = ctx.input(kGrad);
  ASSIGN_OR_RETURN(const Tensor a, ReadCopy(ctx, *accum));  // Private copy.
  const Tensor delta(var->dtype(), var->shape());
  ctx.ParallelFor(delta.NumElements(), kApplyCost, [&](int64_t b, int64_t e) {
    const auto g = Widen<T>(grad, b, e);
    Block<T>(a, b, e) = (mu * Widen<T>(a, b, e) + g).template cast<T>();
    if (nesterov) {
      Block<T>(delta, b, e) =
          (lr * (g + mu * Widen<T>(a, b, e))).template cast<T>();
    } else {
      Block<T>(delta, b, e) = (lr * Widen<T>(a, b, e)).template cast<T>();
    }
  });
  RETURN_IF_ERROR(WithNodeName(ctx, accum->Assign(a)));
  return WithNodeName(ctx, var->AssignAdd(delta, -1));
}

REGISTER_OP("ApplyMomentum")
    .Input("var")
    .Input("accum")
    .Input("lr")
    .Input("grad")
    .Input("momentum")
    .RequiredAttr("dtype", AttrType::kDType)
    .RequiredAttr("shape", AttrType::kShape)
    .Attr("variable", "")
    .Attr("use_nesterov", false)
    .SetStateful(ResourceAccess::kWrite)
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      RETURN_IF_ERROR(c.attr<bool>("use_nesterov").status());
      RETURN_IF_ERROR(ExpectHandle(c, kVar));
      RETURN_IF_ERROR(c.ExpectDType(kAccum, DType::kResource));
      RETURN_IF_ERROR(ExpectFloatScalar(c, kLr));
      RETURN_IF_ERROR(c.ExpectFloat(kGrad));
      RETURN_IF_ERROR(ExpectMatchesVariable(c, kGrad));
      return ExpectFloatScalar(c, kMomentum);
    })
    .SetKernel([](KernelContext& ctx) -> absl::Status {
      ASSIGN_OR_RETURN(VariableResource * var, VariableInput(ctx, kVar));
      ASSIGN_OR_RETURN(VariableResource * accum, VariableInput(ctx, kAccum));
      RETURN_IF_ERROR(CheckMatchesVariable(ctx, kGrad, *var));
      IPUFLOW_SWITCH_FLOAT(var->dtype(), return Momentum<T>(ctx, var, accum),
                           return UnsupportedDType(ctx, var->dtype()));
    })
    .NotDifferentiable("it updates variables and has no outputs");

}  // namespace

Node* ApplyMomentum(const Scope& scope, Output var, Output accum, Output lr,
                    Output grad, Output momentum, bool use_nesterov) {
  return AddHandleNode(scope, "ApplyMomentum", var, {accum, lr, grad, momentum},
                       {{"use_nesterov", use_nesterov}});
}

}  // namespace ipuflow::ops
