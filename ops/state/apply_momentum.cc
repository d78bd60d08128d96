#include "ops/state/apply_momentum.h"

#include "core/op_registry.h"
#include "ops/state/apply_util.h"
#include "ops/state/handle.h"

namespace ipuflow::ops {
namespace {
// Its own namespace: the input enums of the fused updates share names
// (kVar, kLr) in one unity unit.
namespace momentum {

enum Input { kVar, kAccum, kLr, kGrad, kMomentum, kShard };

// In float32 for float16 variables too (apply_util.h). A float16 accum is
// rounded once per step, after the update uses its float32 value.
absl::Status Momentum(KernelContext& ctx, VariableResource* var,
                      VariableResource* accum, const UpdateShard& shard) {
  const float lr = ScalarInput(ctx, kLr);
  const float mu = ScalarInput(ctx, kMomentum);
  const bool nesterov = ctx.attr<bool>("use_nesterov");
  const Tensor grad = InputFloat32(ctx, kGrad);
  ASSIGN_OR_RETURN(const Tensor a, ReadFloat32(ctx, *accum));  // Private copy.
  const Tensor delta(DType::kFloat32, var->shape());
  ParallelForShard(
      ctx, shard, delta.NumElements(), kApplyCost, [&](int64_t b, int64_t e) {
        const auto g = Widen<float>(grad, b, e);
        Block<float>(a, b, e) = mu * Widen<float>(a, b, e) + g;
        if (nesterov) {
          Block<float>(delta, b, e) = lr * (g + mu * Widen<float>(a, b, e));
        } else {
          Block<float>(delta, b, e) = lr * Widen<float>(a, b, e);
        }
      });
  RETURN_IF_ERROR(StoreFloat32(ctx, 1, a, accum));
  return SubtractFromVariable(ctx, 0, delta, var, shard);
}

// float32 variable and accumulator: the same arithmetic in one pass over
// both in place (VariableResource::Update, var then accum), without the
// accumulator's copies and the delta tensor.
absl::Status MomentumFloat32InPlace(const KernelContext& ctx,
                                    VariableResource* var,
                                    VariableResource* accum,
                                    const UpdateShard& shard) {
  const float lr = ScalarInput(ctx, kLr);
  const float mu = ScalarInput(ctx, kMomentum);
  const bool nesterov = ctx.attr<bool>("use_nesterov");
  const Tensor& grad = ctx.input(kGrad);
  absl::Status inner;
  const absl::Status outer = var->Update([&](Tensor& w) {
    inner = accum->Update([&](Tensor& a) {
      ParallelForShard(ctx, shard, w.NumElements(), kApplyCost,
                       [&](int64_t b, int64_t e) {
                         const auto g = Widen<float>(grad, b, e);
                         ArrayMap<float> ab = Block<float>(a, b, e),
                                         wb = Block<float>(w, b, e);
                         ab = mu * ab + g;
                         if (nesterov) {
                           wb -= lr * (g + mu * ab);
                         } else {
                           wb -= lr * ab;
                         }
                       });
    });
  });
  RETURN_IF_ERROR(WithNodeName(ctx, outer));
  return WithNodeName(ctx, inner);
}

REGISTER_OP("ApplyMomentum")
    .Input("var")
    .Input("accum")
    .Input("lr")
    .Input("grad")
    .Input("momentum")
    .VariadicInput("shard")  // None, or one int32 [2] (update_shard.h).
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
      RETURN_IF_ERROR(ExpectFloatScalar(c, kMomentum));
      return ExpectShardInput(c, kShard);
    })
    .SetKernel([](KernelContext& ctx) -> absl::Status {
      ASSIGN_OR_RETURN(VariableResource * var, VariableInput(ctx, kVar));
      ASSIGN_OR_RETURN(VariableResource * accum, VariableInput(ctx, kAccum));
      RETURN_IF_ERROR(ExpectFloatVariable(ctx, *var));
      RETURN_IF_ERROR(CheckMatchesVariable(ctx, kGrad, *var));
      ASSIGN_OR_RETURN(const UpdateShard shard, ShardInput(ctx, kShard));
      if (var->dtype() == DType::kFloat32 &&
          accum->dtype() == DType::kFloat32 &&
          ctx.input(kGrad).dtype() == DType::kFloat32 && var != accum &&
          accum->shape() == var->shape()) {
        return MomentumFloat32InPlace(ctx, var, accum, shard);
      }
      return Momentum(ctx, var, accum, shard);
    })
    .NotDifferentiable("it updates variables and has no outputs");

}  // namespace momentum
}  // namespace

Node* ApplyMomentum(const Scope& scope, Output var, Output accum, Output lr,
                    Output grad, Output momentum, bool use_nesterov,
                    Output shard) {
  std::vector<Output> rest = {accum, lr, grad, momentum};
  if (shard.valid()) rest.push_back(shard);
  return AddHandleNode(scope, "ApplyMomentum", var, std::move(rest),
                       {{"use_nesterov", use_nesterov}});
}

}  // namespace ipuflow::ops
