#include "ops/state/apply_adam.h"

#include "core/op_registry.h"
#include "ops/state/apply_util.h"
#include "ops/state/handle.h"

namespace ipuflow::ops {
namespace {

// delta = lr * weight_decay * var
//       + step_size * m / (sqrt(v) / sqrt(1 - beta2^t) + epsilon)
struct AdamRule {
  static absl::StatusOr<Tensor> Delta(const KernelContext& ctx,
                                      const AdamStep& s,
                                      const VariableResource& var) {
    const AdamHyper& h = s.h;
    Tensor w;  // The old value, for the decoupled decay.
    if (h.weight_decay > 0) {
      ASSIGN_OR_RETURN(w, ReadFloat32(ctx, var));
    }
    const float decay = h.lr * h.weight_decay;
    Tensor delta(DType::kFloat32, var.shape());
    ParallelForShard(
        ctx, s.shard, delta.NumElements(), kApplyCost,
        [&](int64_t b, int64_t e) {
          s.UpdateMoments(b, e);
          const auto step =
              h.step_size * Widen<float>(s.m, b, e) /
              (Widen<float>(s.v, b, e).unaryExpr(ExactSqrt()) / h.sqrt_bc2 +
               h.epsilon);
          if (h.weight_decay > 0) {
            Block<float>(delta, b, e) = decay * Widen<float>(w, b, e) + step;
          } else {
            Block<float>(delta, b, e) = step;
          }
        });
    return delta;
  }
};

// float32 variable and slots: the same arithmetic as AdamRule and
// AdamFamilyUpdate in one pass over var, m and v in place (under their
// locks, taken in that order), where the general path copies m, v and var
// out, writes a delta and copies m and v back: about 9 passes over the
// variable's size and 4 allocations per step.
absl::Status AdamFloat32InPlace(const KernelContext& ctx, const AdamHyper& h,
                                VariableResource* var, VariableResource* m,
                                VariableResource* v, const UpdateShard& shard) {
  const Tensor& grad = ctx.input(AdamInput::kGrad);
  const float decay = h.lr * h.weight_decay;
  absl::Status inner;
  const absl::Status outer = var->Update([&](Tensor& w) {
    inner = m->Update([&](Tensor& mt) {
      inner = v->Update([&](Tensor& vt) {
        ParallelForShard(
            ctx, shard, w.NumElements(), kApplyCost, [&](int64_t b, int64_t e) {
              const auto g = Widen<float>(grad, b, e);
              ArrayMap<float> mb = Block<float>(mt, b, e),
                              vb = Block<float>(vt, b, e);
              mb = h.beta1 * mb + (1 - h.beta1) * g;
              vb = h.beta2 * vb + (1 - h.beta2) * g * g;
              const auto step =
                  h.step_size * mb /
                  (vb.unaryExpr(ExactSqrt()) / h.sqrt_bc2 + h.epsilon);
              ArrayMap<float> wb = Block<float>(w, b, e);
              if (h.weight_decay > 0) {
                wb -= decay * wb + step;
              } else {
                wb -= step;
              }
            });
      });
    });
  });
  RETURN_IF_ERROR(WithNodeName(ctx, outer));
  return WithNodeName(ctx, inner);
}

absl::Status ApplyAdamKernel(KernelContext& ctx) {
  ASSIGN_OR_RETURN(VariableResource * var, VariableInput(ctx, AdamInput::kVar));
  ASSIGN_OR_RETURN(VariableResource * m, VariableInput(ctx, AdamInput::kM));
  ASSIGN_OR_RETURN(VariableResource * v, VariableInput(ctx, AdamInput::kV));
  RETURN_IF_ERROR(ExpectFloatVariable(ctx, *var));
  RETURN_IF_ERROR(CheckMatchesVariable(ctx, AdamInput::kGrad, *var));
  ASSIGN_OR_RETURN(const UpdateShard shard, ShardInput(ctx, AdamInput::kShard));
  const bool float32 = var->dtype() == DType::kFloat32 &&
                       m->dtype() == DType::kFloat32 &&
                       v->dtype() == DType::kFloat32 &&
                       ctx.input(AdamInput::kGrad).dtype() == DType::kFloat32;
  // Distinct variables of one shape only: Update holds each one's lock,
  // and the general path reports mismatched slots.
  if (float32 && var != m && var != v && m != v && m->shape() == var->shape() &&
      v->shape() == var->shape()) {
    ASSIGN_OR_RETURN(const AdamHyper h, GetAdamHyper(ctx));
    return AdamFloat32InPlace(ctx, h, var, m, v, shard);
  }
  return AdamFamilyUpdate<AdamRule>(ctx, var, m, v, shard);
}

[[maybe_unused]] const OpRegistration kApplyAdam =
    RegisterAdamFamilyOp("ApplyAdam")
        .SetKernel(ApplyAdamKernel)
        .NotDifferentiable("it updates variables and has no outputs");

}  // namespace

Node* ApplyAdam(const Scope& scope, Output var, Output m, Output v, Output lr,
                Output grad, Output beta1, Output beta2, Output epsilon,
                Output step, float weight_decay, Output shard) {
  std::vector<Output> rest = {m, v, lr, grad, beta1, beta2, epsilon, step};
  if (shard.valid()) rest.push_back(shard);
  return AddHandleNode(scope, "ApplyAdam", var, std::move(rest),
                       {{"weight_decay", weight_decay}});
}

}  // namespace ipuflow::ops
