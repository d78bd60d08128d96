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
double SquaredNorm(const KernelContext& ctx, const Tensor& t) {
  constexpr int64_t kChunk = 4096;
  const int64_t n = t.NumElements();
  std::vector<double> partial((n + kChunk - 1) / kChunk, 0.0);
  ctx.ParallelFor(static_cast<int64_t>(partial.size()), kCwiseCost * kChunk,
                  [&](int64_t b, int64_t e) {
                    for (int64_t c = b; c < e; ++c) {
                      const int64_t end = std::min(n, (c + 1) * kChunk);
                      partial[c] = Widen<float>(t, c * kChunk, end)
                                       .template cast<double>()
                                       .square()
                                       .sum();
                    }
                  });
  double total = 0;
  for (double p : partial) total += p;
  return total;
}

// r = m / (1 - beta1^t) / (sqrt(v) / sqrt(1 - beta2^t) + epsilon)
//   + weight_decay * var;  delta = lr * trust * r
struct LambRule {
  static absl::StatusOr<Tensor> Delta(const KernelContext& ctx,
                                      const AdamStep& s,
                                      const VariableResource& var) {
    const AdamHyper& h = s.h;
    ASSIGN_OR_RETURN(const Tensor w, ReadFloat32(ctx, var));
    Tensor r(DType::kFloat32, var.shape());  // Then lr * trust * r.
    const int64_t n = r.NumElements();
    ctx.ParallelFor(n, kApplyCost, [&](int64_t b, int64_t e) {
      s.UpdateMoments(b, e);
      Block<float>(r, b, e) =
          Widen<float>(s.m, b, e) / h.bc1 /
              (Widen<float>(s.v, b, e).sqrt() / h.sqrt_bc2 + h.epsilon) +
          h.weight_decay * Widen<float>(w, b, e);
    });
    const double w_norm = std::sqrt(SquaredNorm(ctx, w));
    const double r_norm = std::sqrt(SquaredNorm(ctx, r));
    const float trust =
        w_norm > 0 && r_norm > 0 ? static_cast<float>(w_norm / r_norm) : 1.f;
    const float scale = h.lr * trust;
    ctx.ParallelFor(n, kCwiseCost, [&](int64_t b, int64_t e) {
      Block<float>(r, b, e) = scale * Widen<float>(r, b, e);
    });
    return r;
  }
};

[[maybe_unused]] const OpRegistration kApplyLamb =
    RegisterAdamFamilyOp("ApplyLamb")
        .SetKernel(AdamFamilyKernel<LambRule>)
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
