// Shared pieces of the fused optimizer-update kernels (ApplyGradientDescent,
// ApplyMomentum, ApplyAdam, ApplyLamb): float views of variable-sized
// blocks, the cost model, and the input layout, shape function and
// hyperparameter checks ApplyAdam and ApplyLamb share. Updates compute in
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

#include "core/kernel.h"
#include "core/op_registry.h"
#include "ops/cwise.h"

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

// Shape function of ApplyAdam and ApplyLamb (attribute weight_decay >= 0).
absl::Status AdamFamilyShape(ShapeContext& c);

struct AdamHyper {
  float lr, beta1, beta2, epsilon, weight_decay;
  float step_size;  // lr / (1 - beta1^t)
  float sqrt_bc2;   // sqrt(1 - beta2^t)
  float bc1;        // 1 - beta1^t
};

// The scalar inputs and weight_decay, checked: betas in [0, 1), epsilon >= 0,
// step >= 1.
absl::StatusOr<AdamHyper> GetAdamHyper(const KernelContext& ctx);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_STATE_APPLY_UTIL_H_
