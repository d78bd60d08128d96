#include "ops/state/apply_gradient_descent.h"

#include "core/op_registry.h"
#include "ops/state/apply_util.h"
#include "ops/state/handle.h"

namespace ipuflow::ops {
namespace {
// Its own namespace: the input enums of the fused updates share names
// (kVar, kLr) in one unity unit.
namespace gradient_descent {

enum Input { kVar, kLr, kGrad, kShard };

// In float32 for float16 variables too (apply_util.h).
absl::Status GradientDescent(KernelContext& ctx, VariableResource* var,
                             const UpdateShard& shard) {
  const float lr = ScalarInput(ctx, kLr);
  const Tensor grad = InputFloat32(ctx, kGrad);
  const Tensor delta(DType::kFloat32, var->shape());
  ParallelForShard(ctx, shard, delta.NumElements(), kApplyCost,
                   [&](int64_t b, int64_t e) {
                     Block<float>(delta, b, e) = lr * Widen<float>(grad, b, e);
                   });
  // A float32 variable subtracts under its lock.
  return SubtractFromVariable(ctx, 0, delta, var, shard);
}

REGISTER_OP("ApplyGradientDescent")
    .Input("var")
    .Input("lr")
    .Input("grad")
    .VariadicInput("shard")  // None, or one int32 [2] (update_shard.h).
    .RequiredAttr("dtype", AttrType::kDType)
    .RequiredAttr("shape", AttrType::kShape)
    .Attr("variable", "")
    .SetStateful(ResourceAccess::kWrite)
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      RETURN_IF_ERROR(ExpectHandle(c, kVar));
      RETURN_IF_ERROR(ExpectFloatScalar(c, kLr));
      RETURN_IF_ERROR(c.ExpectFloat(kGrad));
      RETURN_IF_ERROR(ExpectMatchesVariable(c, kGrad));
      return ExpectShardInput(c, kShard);
    })
    .SetKernel([](KernelContext& ctx) -> absl::Status {
      ASSIGN_OR_RETURN(VariableResource * var, VariableInput(ctx, kVar));
      RETURN_IF_ERROR(ExpectFloatVariable(ctx, *var));
      RETURN_IF_ERROR(CheckMatchesVariable(ctx, kGrad, *var));
      ASSIGN_OR_RETURN(const UpdateShard shard, ShardInput(ctx, kShard));
      return GradientDescent(ctx, var, shard);
    })
    .NotDifferentiable("it updates a variable and has no outputs");

}  // namespace gradient_descent
}  // namespace

Node* ApplyGradientDescent(const Scope& scope, Output var, Output lr,
                           Output grad, Output shard) {
  std::vector<Output> rest = {lr, grad};
  if (shard.valid()) rest.push_back(shard);
  return AddHandleNode(scope, "ApplyGradientDescent", var, std::move(rest));
}

}  // namespace ipuflow::ops
