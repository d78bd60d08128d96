#include "ops/state/apply_lamb.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/op_registry.h"
#include "ops/state/apply_util.h"
#include "ops/state/handle.h"

namespace ipuflow::ops {
namespace {

// Sum of squares of `t`, accumulated in double over fixed chunks summed in
// order: the same result whatever the thread count.
template <typename T>
double SquaredNorm(const KernelContext& ctx, const Tensor& t) {
  constexpr int64_t kChunk = 4096;
  const int64_t n = t.NumElements();
  std::vector<double> partial((n + kChunk - 1) / kChunk, 0.0);
  ctx.ParallelFor(static_cast<int64_t>(partial.size()), kCwiseCost * kChunk,
                  [&](int64_t b, int64_t e) {
                    for (int64_t c = b; c < e; ++c) {
                      const int64_t end = std::min(n, (c + 1) * kChunk);
                      partial[c] = Widen<T>(t, c * kChunk, end)
                                       .template cast<double>()
                                       .square()
                                       .sum();
                    }
                  });
  double total = 0;
  for (double p : partial) total += p;
  return total;
}

template <typename T>
absl::Status Lamb(KernelContext& ctx, VariableResource* var,
                  VariableResource* m_var, VariableResource* v_var) {
  ASSIGN_OR_RETURN(const AdamHyper h, GetAdamHyper(ctx));
  const Tensor& grad = ctx.input(AdamInput::kGrad);
  ASSIGN_OR_RETURN(const Tensor m, ReadCopy(ctx, *m_var));  // Private copies.
  ASSIGN_OR_RETURN(const Tensor v, ReadCopy(ctx, *v_var));
  ASSIGN_OR_RETURN(const Tensor w, ReadCopy(ctx, *var));
  const Tensor r(var->dtype(), var->shape());  // Then lr * trust * r.
  const int64_t n = r.NumElements();
  ctx.ParallelFor(n, kApplyCost, [&](int64_t b, int64_t e) {
    const auto g = Widen<T>(grad, b, e);
    Block<T>(m, b, e) =
        (h.beta1 * Widen<T>(m, b, e) + (1 - h.beta1) * g).template cast<T>();
    Block<T>(v, b, e) = (h.beta2 * Widen<T>(v, b, e) + (1 - h.beta2) * g * g)
                            .template cast<T>();
    Block<T>(r, b, e) =
        (Widen<T>(m, b, e) / h.bc1 /
             (Widen<T>(v, b, e).sqrt() / h.sqrt_bc2 + h.epsilon) +
         h.weight_decay * Widen<T>(w, b, e))
            .template cast<T>();
  });
  const double w_norm = std::sqrt(SquaredNorm<T>(ctx, w));
  const double r_norm = std::sqrt(SquaredNorm<T>(ctx, r));
  const float trust =
      w_norm > 0 && r_norm > 0 ? static_cast<float>(w_norm / r_norm) : 1.f;
  const float scale = h.lr * trust;
  ctx.ParallelFor(n, kCwiseCost, [&](int64_t b, int64_t e) {
    Block<T>(r, b, e) = (scale * Widen<T>(r, b, e)).template cast<T>();
  });
  RETURN_IF_ERROR(WithNodeName(ctx, m_var->Assign(m)));
  RETURN_IF_ERROR(WithNodeName(ctx, v_var->Assign(v)));
  // Not atomic with the read of w above (see ApplyAdam).
  return WithNodeName(ctx, var->AssignAdd(r, -1));
}

REGISTER_OP("ApplyLamb")
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
      IPUFLOW_SWITCH_FLOAT(var->dtype(), return Lamb<T>(ctx, var, m, v),
                           return UnsupportedDType(ctx, var->dtype()));
    })
    .NotDifferentiable("it updates variables and has no outputs");

}  // namespace

Node* ApplyLamb(const Scope& scope, Output var, Output m, Output v, Output lr,
                Output grad, Output beta1, Output beta2, Output epsilon,
                Output step, float weight_decay) {
  return AddHandleNode(scope, "ApplyLamb", var,
                       {m, v, lr, grad, beta1, beta2, epsilon, step},
                       {{"weight_decay", weight_decay}});
}

}  // namespace ipuflow::ops
