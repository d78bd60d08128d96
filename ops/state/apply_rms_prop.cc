#include "ops/state/apply_rms_prop.h"

#include "absl/strings/str_cat.h"
#include "core/op_registry.h"
#include "ops/state/apply_util.h"
#include "ops/state/handle.h"

namespace ipuflow::ops {
namespace {
// Its own namespace: the input enums of the fused updates share names
// (kVar, kLr) in one unity unit.
namespace rms_prop {

enum RmsInput {
  kVar,
  kMs,
  kMom,
  kLr,
  kRho,
  kMomentum,
  kEpsilon,
  kGrad,
  kShard
};

absl::Status CheckHyper(const KernelContext& ctx, float rho, float momentum,
                        float epsilon) {
  if (!(rho >= 0 && rho <= 1) || !(momentum >= 0) || !(epsilon >= 0)) {
    return ctx.InvalidArgument(
        "rho must be in [0, 1], momentum and epsilon "
        ">= 0; got rho ",
        rho, ", momentum ", momentum, ", epsilon ", epsilon);
  }
  return absl::OkStatus();
}

REGISTER_OP("ApplyRMSProp")
    .Input("var")
    .Input("ms")
    .Input("mom")
    .Input("lr")
    .Input("rho")
    .Input("momentum")
    .Input("epsilon")
    .Input("grad")
    .VariadicInput("shard")
    .RequiredAttr("dtype", AttrType::kDType)
    .RequiredAttr("shape", AttrType::kShape)
    .Attr("variable", "")
    .SetStateful(ResourceAccess::kWrite)
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      RETURN_IF_ERROR(ExpectHandle(c, kVar));
      RETURN_IF_ERROR(c.ExpectDType(kMs, DType::kResource));
      RETURN_IF_ERROR(c.ExpectDType(kMom, DType::kResource));
      for (int i : {kLr, kRho, kMomentum, kEpsilon}) {
        RETURN_IF_ERROR(ExpectFloatScalar(c, i));
      }
      RETURN_IF_ERROR(c.ExpectFloat(kGrad));
      RETURN_IF_ERROR(ExpectMatchesVariable(c, kGrad));
      return ExpectShardInput(c, kShard);
    })
    .SetKernel([](KernelContext& ctx) -> absl::Status {
      ASSIGN_OR_RETURN(VariableResource * var, VariableInput(ctx, kVar));
      ASSIGN_OR_RETURN(VariableResource * ms_var, VariableInput(ctx, kMs));
      ASSIGN_OR_RETURN(VariableResource * mom_var, VariableInput(ctx, kMom));
      RETURN_IF_ERROR(ExpectFloatVariable(ctx, *var));
      RETURN_IF_ERROR(CheckMatchesVariable(ctx, kGrad, *var));
      ASSIGN_OR_RETURN(const UpdateShard shard, ShardInput(ctx, kShard));
      const float lr = ScalarInput(ctx, kLr), rho = ScalarInput(ctx, kRho),
                  mu = ScalarInput(ctx, kMomentum),
                  eps = ScalarInput(ctx, kEpsilon);
      RETURN_IF_ERROR(CheckHyper(ctx, rho, mu, eps));
      const Tensor grad = InputFloat32(ctx, kGrad);
      ASSIGN_OR_RETURN(const Tensor ms, ReadFloat32(ctx, *ms_var));
      ASSIGN_OR_RETURN(const Tensor mom, ReadFloat32(ctx, *mom_var));
      const Tensor delta(DType::kFloat32, var->shape());
      ParallelForShard(ctx, shard, delta.NumElements(), kApplyCost,
                       [&](int64_t b, int64_t e) {
                         const auto g = Widen<float>(grad, b, e);
                         ArrayMap<float> s = Block<float>(ms, b, e);
                         ArrayMap<float> m = Block<float>(mom, b, e);
                         s = rho * s + (1 - rho) * g * g;
                         m = mu * m + lr * g / (s + eps).unaryExpr(ExactSqrt());
                         Block<float>(delta, b, e) = m;
                       });
      RETURN_IF_ERROR(StoreFloat32(ctx, 1, ms, ms_var));
      RETURN_IF_ERROR(StoreFloat32(ctx, 2, mom, mom_var));
      return SubtractFromVariable(ctx, 0, delta, var, shard);
    })
    .NotDifferentiable("it updates variables and has no outputs");

enum AdagradInput { kAVar, kAccum, kALr, kAEpsilon, kAGrad, kAShard };

REGISTER_OP("ApplyAdagrad")
    .Input("var")
    .Input("accum")
    .Input("lr")
    .Input("epsilon")
    .Input("grad")
    .VariadicInput("shard")
    .RequiredAttr("dtype", AttrType::kDType)
    .RequiredAttr("shape", AttrType::kShape)
    .Attr("variable", "")
    .Attr("initial_accumulator_value", 0.0f)
    .SetStateful(ResourceAccess::kWrite)
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      ASSIGN_OR_RETURN(float init, c.attr<float>("initial_accumulator_value"));
      if (!(init >= 0) || !std::isfinite(init)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "initial_accumulator_value must be finite and >= 0, got ", init));
      }
      RETURN_IF_ERROR(ExpectHandle(c, kAVar));
      RETURN_IF_ERROR(c.ExpectDType(kAccum, DType::kResource));
      RETURN_IF_ERROR(ExpectFloatScalar(c, kALr));
      RETURN_IF_ERROR(ExpectFloatScalar(c, kAEpsilon));
      RETURN_IF_ERROR(c.ExpectFloat(kAGrad));
      RETURN_IF_ERROR(ExpectMatchesVariable(c, kAGrad));
      return ExpectShardInput(c, kAShard);
    })
    .SetKernel([](KernelContext& ctx) -> absl::Status {
      ASSIGN_OR_RETURN(VariableResource * var, VariableInput(ctx, kAVar));
      ASSIGN_OR_RETURN(VariableResource * acc_var, VariableInput(ctx, kAccum));
      RETURN_IF_ERROR(ExpectFloatVariable(ctx, *var));
      RETURN_IF_ERROR(CheckMatchesVariable(ctx, kAGrad, *var));
      ASSIGN_OR_RETURN(const UpdateShard shard, ShardInput(ctx, kAShard));
      const float lr = ScalarInput(ctx, kALr);
      const float eps = ScalarInput(ctx, kAEpsilon);
      const float init = ctx.attr<float>("initial_accumulator_value");
      if (!(eps >= 0)) {
        return ctx.InvalidArgument("epsilon must be >= 0, got ", eps);
      }
      const Tensor grad = InputFloat32(ctx, kAGrad);
      ASSIGN_OR_RETURN(const Tensor acc, ReadFloat32(ctx, *acc_var));
      const Tensor delta(DType::kFloat32, var->shape());
      ParallelForShard(ctx, shard, delta.NumElements(), kApplyCost,
                       [&](int64_t b, int64_t e) {
                         const auto g = Widen<float>(grad, b, e);
                         ArrayMap<float> a = Block<float>(acc, b, e);
                         a += g * g;
                         Block<float>(delta, b, e) =
                             lr * g / ((a + init).unaryExpr(ExactSqrt()) + eps);
                       });
      RETURN_IF_ERROR(StoreFloat32(ctx, 1, acc, acc_var));
      return SubtractFromVariable(ctx, 0, delta, var, shard);
    })
    .NotDifferentiable("it updates variables and has no outputs");

}  // namespace rms_prop
}  // namespace

Node* ApplyRMSProp(const Scope& scope, Output var, Output ms, Output mom,
                   Output lr, Output rho, Output momentum, Output epsilon,
                   Output grad, Output shard) {
  std::vector<Output> rest = {ms, mom, lr, rho, momentum, epsilon, grad};
  if (shard.valid()) rest.push_back(shard);
  return AddHandleNode(scope, "ApplyRMSProp", var, std::move(rest), {});
}

Node* ApplyAdagrad(const Scope& scope, Output var, Output accum, Output lr,
                   Output epsilon, Output grad, float initial_accumulator_value,
                   Output shard) {
  std::vector<Output> rest = {accum, lr, epsilon, grad};
  if (shard.valid()) rest.push_back(shard);
  return AddHandleNode(
      scope, "ApplyAdagrad", var, std::move(rest),
      {{"initial_accumulator_value", initial_accumulator_value}});
}

}  // namespace ipuflow::ops
