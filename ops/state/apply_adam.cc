#include "ops/state/apply_adam.h"

#include "core/op_registry.h"
#include "ops/state/apply_util.h"
#include "ops/state/handle.h"

namespace ipuflow::ops {
namespace {

template <typename T>
absl::Status Adam(KernelContext& ctx, VariableResource* var,
                  VariableResource* m_var, VariableResource* v_var) {
  ASSIGN_OR_RETURN(const AdamHyper h, GetAdamHyper(ctx));
  const Tensor& grad = ctx.input(AdamInput::kGrad);
  ASSIGN_OR_RETURN(const Tensor m, ReadCopy(ctx, *m_var));  // Private copies.
  ASSIGN_OR_RETURN(const Tensor v, ReadCopy(ctx, *v_var));
  Tensor w;  // The old value, for the decoupled decay.
  if (h.weight_decay > 0) {
    ASSIGN_OR_RETURN(w, ReadCopy(ctx, *var));
  }
  const float decay = h.lr * h.weight_decay;
  const Tensor delta(var->dtype(), var->shape());
  ctx.ParallelFor(delta.NumElements(), kApplyCost, [&](int64_t b, int64_t e) {
    const auto g = Widen<T>(grad, b, e);
    Block<T>(m, b, e) =
        (h.beta1 * Widen<T>(m, b, e) + (1 - h.beta1) * g).template cast<T>();
    Block<T>(v, b, e) = (h.beta2 * Widen<T>(v, b, e) + (1 - h.beta2) * g * g)
                            .template cast<T>();
    const auto step = h.step_size * Widen<T>(m, b, e) /
                      (Widen<T>(v, b, e).sqrt() / h.sqrt_bc2 + h.epsilon);
    if (h.weight_decay > 0) {
      Block<T>(delta, b, e) =
          (decay * Widen<T>(w, b, e) + step).template cast<T>();
    } else {
      Block<T>(delta, b, e) = step.template cast<T>();
    }
  });
  RETURN_IF_ERROR(WithNodeName(ctx, m_var->Assign(m)));
  RETURN_IF_ERROR(WithNodeName(ctx, v_var->Assign(v)));
  // Not atomic with the read of w above: VariableResource offers no
  // read-modify-write under one lock, so a concurrent writer to var from
  // another program could slip in between.
  return WithNodeName(ctx, var->AssignAdd(delta, -1));
}

REGISTER_OP("ApplyAdam")
    .Input("var")
    .Input("m")
    .Input("v")
    .Input("lr")
    .Input("grad")
    .Input("beta1")
    .Input("beta2")
    .Input("epsilon")
    .Input("step")
    .RequiredAttr("dtype")
    .RequiredAttr("shape")
    .Attr("variable", "")
    .Attr("weight_decay", 0.0f)
    .SetStateful(ResourceAccess::kWrite)
    .SetShapeFn(AdamFamilyShape)
    .SetKernel([](KernelContext& ctx) -> absl::Status {
      ASSIGN_OR_RETURN(VariableResource * var,
                       VariableInput(ctx, AdamInput::kVar));
      ASSIGN_OR_RETURN(VariableResource * m, VariableInput(ctx, AdamInput::kM));
      ASSIGN_OR_RETURN(VariableResource * v, VariableInput(ctx, AdamInput::kV));
      RETURN_IF_ERROR(CheckMatchesVariable(ctx, AdamInput::kGrad, *var));
      IPUFLOW_SWITCH_FLOAT(var->dtype(), return Adam<T>(ctx, var, m, v),
                           return UnsupportedDType(ctx, var->dtype()));
    })
    .NotDifferentiable("it updates variables and has no outputs");

}  // namespace

Node* ApplyAdam(const Scope& scope, Output var, Output m, Output v, Output lr,
                Output grad, Output beta1, Output beta2, Output epsilon,
                Output step, float weight_decay) {
  return AddHandleNode(scope, "ApplyAdam", var,
                       {m, v, lr, grad, beta1, beta2, epsilon, step},
                       {{"weight_decay", weight_decay}});
}

}  // namespace ipuflow::ops
