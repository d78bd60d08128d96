// Shared pieces of the fused optimizer-update kernels (ApplyGradientDescent,
// ApplyMomentum, ApplyAdam, ApplyLamb): float views of variable-sized
// blocks and the cost model; for ApplyAdam and ApplyLamb also the
// registration (inputs, attributes, shape function), the hyperparameter
// checks and the kernel around their update rules. Updates compute in
// float32 whatever the variable's dtype (float16 variables are widened per
// block), so a float16 model does not lose small updates to rounding inside the
// formula.
//
//   ctx.ParallelFor(n, kApplyCost, [&](int64_t b, int64_t e) {
//     Block<T>(delta, b, e) = (lr * Widen<T>(grad, b, e)).template cast<T>();
//   });
//
// Thread safety: pure functions.
#ifndef IPUFLOW_OPS_STATE_APPLY_UTIL_H_
#define IPUFLOW_OPS_STATE_APPLY_UTIL_H_

#include <string>
#include <utility>

#include "core/kernel.h"
#include "core/op_registry.h"
#include "ops/cwise.h"
#include "ops/state/handle.h"

namespace ipuflow::ops {

// Cycles per element of an update (a handful of multiply-adds and a sqrt).
inline constexpr double kApplyCost = 16.0;

// Elements [b, e) of `t` as a writable array.
template <typename T>
ArrayMap<T> Block(const Tensor& t, int64_t b, int64_t e) {
  return ArrayMap<T>(t.data<T>() + b, e - b);
}

// Elements [b, e) of `t` as a float32 expression.
template <typename T>
auto Widen(const Tensor& t, int64_t b, int64_t e) {
  return ConstArrayMap<T>(t.data<T>() + b, e - b).template cast<float>();
}

// The float32 scalar input `i` (shape functions checked dtype and rank).
inline float ScalarInput(const KernelContext& ctx, int i) {
  return ctx.input(i).scalar<float>();
}

// Inputs of ApplyAdam and ApplyLamb.
struct AdamInput {
  enum : int { kVar, kM, kV, kLr, kGrad, kBeta1, kBeta2, kEpsilon, kStep };
};

struct AdamHyper {
  float lr, beta1, beta2, epsilon, weight_decay;
  float step_size;  // lr / (1 - beta1^t)
  float sqrt_bc2;   // sqrt(1 - beta2^t)
  float bc1;        // 1 - beta1^t
};

// The scalar inputs and weight_decay, checked: betas in [0, 1), epsilon >= 0,
// step >= 1.
absl::StatusOr<AdamHyper> GetAdamHyper(const KernelContext& ctx);

// Registers `name` with ApplyAdam's inputs, attributes (weight_decay >= 0),
// statefulness and shape function; the caller adds kernel and gradient.
OpRegistration RegisterAdamFamilyOp(const std::string& name);

// One step of ApplyAdam or ApplyLamb, as its update rule sees it.
struct AdamStep {
  AdamHyper h;
  const Tensor& grad;
  Tensor m, v;  // Private copies of the slots, written back after the rule.

  // m = beta1 * m + (1 - beta1) * grad;  v = beta2 * v + (1 - beta2) * grad^2
  // over elements [b, e).
  template <typename T>
  void UpdateMoments(int64_t b, int64_t e) const {
    const auto g = Widen<T>(grad, b, e);
    Block<T>(m, b, e) =
        (h.beta1 * Widen<T>(m, b, e) + (1 - h.beta1) * g).template cast<T>();
    Block<T>(v, b, e) = (h.beta2 * Widen<T>(v, b, e) + (1 - h.beta2) * g * g)
                            .template cast<T>();
  }
};

// Runs `Rule::Delta<T>(ctx, step, var)`, which must update step.m and step.v
// (UpdateMoments) and returns what to subtract from var; then stores m, v and
// var - delta.
template <typename T, typename Rule>
absl::Status AdamFamilyUpdate(const KernelContext& ctx, VariableResource* var,
                              VariableResource* m_var,
                              VariableResource* v_var) {
  ASSIGN_OR_RETURN(const AdamHyper h, GetAdamHyper(ctx));
  ASSIGN_OR_RETURN(Tensor m, ReadCopy(ctx, *m_var));
  ASSIGN_OR_RETURN(Tensor v, ReadCopy(ctx, *v_var));
  const AdamStep step{h, ctx.input(AdamInput::kGrad), std::move(m),
                      std::move(v)};
  ASSIGN_OR_RETURN(const Tensor delta,
                   Rule::template Delta<T>(ctx, step, *var));
  RETURN_IF_ERROR(WithNodeName(ctx, m_var->Assign(step.m)));
  RETURN_IF_ERROR(WithNodeName(ctx, v_var->Assign(step.v)));
  // Not atomic with a rule's read of var: VariableResource offers no
  // read-modify-write under one lock, so a concurrent writer to var from
  // another program could slip in between.
  return WithNodeName(ctx, var->AssignAdd(delta, -1));
}

// The kernel of ApplyAdam (Rule = AdamRule) or ApplyLamb (LambRule).
template <typename Rule>
absl::Status AdamFamilyKernel(KernelContext& ctx) {
  ASSIGN_OR_RETURN(VariableResource * var, VariableInput(ctx, AdamInput::kVar));
  ASSIGN_OR_RETURN(VariableResource * m, VariableInput(ctx, AdamInput::kM));
  ASSIGN_OR_RETURN(VariableResource * v, VariableInput(ctx, AdamInput::kV));
  RETURN_IF_ERROR(CheckMatchesVariable(ctx, AdamInput::kGrad, *var));
  IPUFLOW_SWITCH_FLOAT(var->dtype(),
                       return (AdamFamilyUpdate<T, Rule>(ctx, var, m, v)),
                       return UnsupportedDType(ctx, var->dtype()));
}

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_STATE_APPLY_UTIL_H_
