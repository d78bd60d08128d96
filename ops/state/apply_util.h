// Shared pieces of the fused optimizer-update kernels (ApplyGradientDescent,
// ApplyMomentum, ApplyAdam, ApplyLamb): float32 working copies of variables,
// slots and gradients, the stores back, float views of variable-sized blocks
// and the cost model; for ApplyAdam and ApplyLamb also the registration
// (inputs, attributes, shape function), the hyperparameter checks and the
// kernel around their update rules.
//
// Every rule computes in float32 whatever the variable's dtype: a float16
// variable, its float16 slots and its float16 gradient are widened (exactly)
// into float32 copies, the float32 rule runs unchanged, and each tensor the
// op writes is rounded once through RoundToHalf (core/half_rounding.h: the
// device's rounding and overflow behaviour). A float32 variable takes the
// same path minus the conversions, so its results are those of the rule.
//
//   const Tensor grad = InputFloat32(ctx, kGrad);
//   Tensor delta(DType::kFloat32, var->shape());
//   ctx.ParallelFor(n, kApplyCost, [&](int64_t b, int64_t e) {
//     Block<float>(delta, b, e) = lr * Widen<float>(grad, b, e);
//   });
//   return SubtractFromVariable(ctx, /*key=*/0, delta, var);
//
// Thread safety: pure functions.
#ifndef IPUFLOW_OPS_STATE_APPLY_UTIL_H_
#define IPUFLOW_OPS_STATE_APPLY_UTIL_H_

#include <immintrin.h>

#include <cmath>
#include <string>
#include <utility>

#include "core/half.h"
#include "core/kernel.h"
#include "core/op_registry.h"
#include "ops/cwise.h"
#include "ops/state/handle.h"
#include "ops/state/update_shard.h"

namespace ipuflow::ops {

// Cycles per element of an update (a handful of multiply-adds and a sqrt).
inline constexpr double kApplyCost = 16.0;

// Exactly rounded float square root in both of Eigen's paths. Eigen's own
// .sqrt() packet path (EIGEN_FAST_MATH) is an rsqrt estimate plus one
// Newton step, which differs in the last bits from the scalar path that
// the unaligned head and the tail of a range take: an element's result
// would depend on where a thread's block or a replica's shard starts. With
// this functor every element gets sqrt(x) correctly rounded, wherever it
// falls (a sharded update equals the whole one bitwise).
struct ExactSqrt {
  float operator()(float x) const { return std::sqrt(x); }
#ifdef __AVX512F__  // --config=avx512: Eigen's packets are 16 floats.
  __m512 packetOp(const __m512& x) const { return _mm512_sqrt_ps(x); }
#endif
#ifdef __AVX__
  __m256 packetOp(const __m256& x) const { return _mm256_sqrt_ps(x); }
#endif
  __m128 packetOp(const __m128& x) const { return _mm_sqrt_ps(x); }
};

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

// Kernel input `i` (float32 or float16) as float32: the input itself when
// float32, a widened copy when float16.
Tensor InputFloat32(const KernelContext& ctx, int i);

// A float32 copy of `var`'s value (widened when it is float16);
// FailedPrecondition naming the node if it was never assigned.
absl::StatusOr<Tensor> ReadFloat32(const KernelContext& ctx,
                                   const VariableResource& var);

// Stores the float32 `value` into `var`: copied when var is float32, rounded
// through RoundToHalf when it is float16. `key` numbers the tensors one node
// writes (0 the variable, 1.. its slots in input order), keying stochastic
// rounding so two tensors of one node never share a stream.
absl::Status StoreFloat32(const KernelContext& ctx, int key,
                          const Tensor& value, VariableResource* var);

// var -= delta (float32). A float32 variable subtracts under its lock
// (VariableResource::AssignAdd), exactly as before float16 support; a
// float16 one computes widen(var) - delta in float32 and rounds once (the
// read and the store are two locked steps, as the Adam family's are).
// With a sharded `shard` only its chunk of var changes (and only that part
// of delta is read); the same arithmetic per element.
absl::Status SubtractFromVariable(const KernelContext& ctx, int key,
                                  const Tensor& delta, VariableResource* var,
                                  const UpdateShard& shard = {});

// OK for float32 and float16 variables; InvalidArgument naming the node
// otherwise.
absl::Status ExpectFloatVariable(const KernelContext& ctx,
                                 const VariableResource& var);

// The float32 scalar input `i` (shape functions checked dtype and rank).
inline float ScalarInput(const KernelContext& ctx, int i) {
  return ctx.input(i).scalar<float>();
}

// Inputs of ApplyAdam and ApplyLamb; kShard is optional (update_shard.h).
struct AdamInput {
  enum : int {
    kVar,
    kM,
    kV,
    kLr,
    kGrad,
    kBeta1,
    kBeta2,
    kEpsilon,
    kStep,
    kShard
  };
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

// Registers `name` with ApplyAdam's inputs (the last, "shard", optional),
// attributes (weight_decay >= 0), statefulness and shape function; the
// caller adds kernel and gradient.
OpRegistration RegisterAdamFamilyOp(const std::string& name);

// One step of ApplyAdam or ApplyLamb, as its update rule sees it.
struct AdamStep {
  AdamHyper h;
  const Tensor& grad;  // float32.
  Tensor m, v;  // float32 private copies of the slots, stored after the rule.
  // The elements the rule computes (the rest of m, v and delta is left as
  // it is: m and v unchanged, delta unread).
  UpdateShard shard;

  // m = beta1 * m + (1 - beta1) * grad;  v = beta2 * v + (1 - beta2) * grad^2
  // over elements [b, e) (absolute indices, within `shard`).
  void UpdateMoments(int64_t b, int64_t e) const {
    const auto g = Widen<float>(grad, b, e);
    Block<float>(m, b, e) = h.beta1 * Widen<float>(m, b, e) + (1 - h.beta1) * g;
    Block<float>(v, b, e) =
        h.beta2 * Widen<float>(v, b, e) + (1 - h.beta2) * g * g;
  }
};

// Runs `Rule::Delta(ctx, step, var)`, which must update step.m and step.v
// (UpdateMoments) and returns what to subtract from var (float32); then
// stores m, v and var - delta (each rounded once if float16).
template <typename Rule>
absl::Status AdamFamilyUpdate(const KernelContext& ctx, VariableResource* var,
                              VariableResource* m_var, VariableResource* v_var,
                              const UpdateShard& shard) {
  ASSIGN_OR_RETURN(const AdamHyper h, GetAdamHyper(ctx));
  ASSIGN_OR_RETURN(Tensor m, ReadFloat32(ctx, *m_var));
  ASSIGN_OR_RETURN(Tensor v, ReadFloat32(ctx, *v_var));
  const Tensor grad = InputFloat32(ctx, AdamInput::kGrad);
  const AdamStep step{h, grad, std::move(m), std::move(v), shard};
  ASSIGN_OR_RETURN(const Tensor delta, Rule::Delta(ctx, step, *var));
  RETURN_IF_ERROR(StoreFloat32(ctx, 1, step.m, m_var));
  RETURN_IF_ERROR(StoreFloat32(ctx, 2, step.v, v_var));
  // Not atomic with a rule's read of var: VariableResource offers no
  // read-modify-write under one lock, so a concurrent writer to var from
  // another program could slip in between.
  return SubtractFromVariable(ctx, 0, delta, var, shard);
}

// The kernel of ApplyLamb (Rule = LambRule): whole variables only (its
// trust ratio needs the norms of the whole weight and update).
template <typename Rule>
absl::Status AdamFamilyKernel(KernelContext& ctx) {
  ASSIGN_OR_RETURN(VariableResource * var, VariableInput(ctx, AdamInput::kVar));
  ASSIGN_OR_RETURN(VariableResource * m, VariableInput(ctx, AdamInput::kM));
  ASSIGN_OR_RETURN(VariableResource * v, VariableInput(ctx, AdamInput::kV));
  RETURN_IF_ERROR(ExpectFloatVariable(ctx, *var));
  RETURN_IF_ERROR(CheckMatchesVariable(ctx, AdamInput::kGrad, *var));
  ASSIGN_OR_RETURN(const UpdateShard shard, ShardInput(ctx, AdamInput::kShard));
  if (shard.sharded()) {
    return WithNodeName(
        ctx, absl::UnimplementedError(
                 "a sharded update needs the norms of the whole variable; "
                 "run it unsharded"));
  }
  return AdamFamilyUpdate<Rule>(ctx, var, m, v, shard);
}

}  // namespace ipuflow::ops

namespace Eigen::internal {
template <>
struct functor_traits<ipuflow::ops::ExactSqrt> {
  enum { Cost = 5 * NumTraits<float>::MulCost, PacketAccess = true };
};
}  // namespace Eigen::internal

#endif  // IPUFLOW_OPS_STATE_APPLY_UTIL_H_
