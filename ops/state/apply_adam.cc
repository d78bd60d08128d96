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
    ctx.ParallelFor(delta.NumElements(), kApplyCost, [&](int64_t b, int64_t e) {
      s.UpdateMoments(b, e);
      const auto step =
          h.step_size * Widen<float>(s.m, b, e) /
          (Widen<float>(s.v, b, e).sqrt() / h.sqrt_bc2 + h.epsilon);
      if (h.weight_decay > 0) {
        Block<float>(delta, b, e) = decay * Widen<float>(w, b, e) + step;
      } else {
        Block<float>(delta, b, e) = step;
      }
    });
    return delta;
  }
};

[[maybe_unused]] const OpRegistration kApplyAdam =
    RegisterAdamFamilyOp("ApplyAdam")
        .SetKernel(AdamFamilyKernel<AdamRule>)
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
