#include "ops/state/apply_sgd.h"

#include "core/half.h"
#include "core/op_registry.h"
#include "ops/state/apply_util.h"
#include "ops/state/handle.h"

namespace ipuflow::ops {
namespace {
// Its own namespace: the input enums of the fused updates share names
// (kVar, kLr) in one unity unit.
namespace sgd {

enum Input {
  kVar,
  kBuf,
  kLr,
  kMomentum,
  kDampening,
  kWeightDecay,
  kStep,
  kGrad,
  kShard
};

REGISTER_OP("ApplySGD")
    .Input("var")
    .Input("buf")
    .Input("lr")
    .Input("momentum")
    .Input("dampening")
    .Input("weight_decay")
    .Input("step")
    .Input("grad")
    .VariadicInput("shard")
    .RequiredAttr("dtype", AttrType::kDType)
    .RequiredAttr("shape", AttrType::kShape)
    .Attr("variable", "")
    .Attr("nesterov", false)
    .SetStateful(ResourceAccess::kWrite)
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      RETURN_IF_ERROR(c.attr<bool>("nesterov").status());
      RETURN_IF_ERROR(ExpectHandle(c, kVar));
      RETURN_IF_ERROR(c.ExpectDType(kBuf, DType::kResource));
      for (int i : {kLr, kMomentum, kDampening, kWeightDecay, kStep}) {
        RETURN_IF_ERROR(ExpectFloatScalar(c, i));
      }
      RETURN_IF_ERROR(c.ExpectFloat(kGrad));
      RETURN_IF_ERROR(ExpectMatchesVariable(c, kGrad));
      return ExpectShardInput(c, kShard);
    })
    .SetKernel([](KernelContext& ctx) -> absl::Status {
      ASSIGN_OR_RETURN(VariableResource * var, VariableInput(ctx, kVar));
      ASSIGN_OR_RETURN(VariableResource * buf_var, VariableInput(ctx, kBuf));
      RETURN_IF_ERROR(ExpectFloatVariable(ctx, *var));
      RETURN_IF_ERROR(CheckMatchesVariable(ctx, kGrad, *var));
      ASSIGN_OR_RETURN(const UpdateShard shard, ShardInput(ctx, kShard));
      const float lr = ScalarInput(ctx, kLr);
      const float mu = ScalarInput(ctx, kMomentum);
      const float damp = ScalarInput(ctx, kDampening);
      const float wd = ScalarInput(ctx, kWeightDecay);
      const float step = ScalarInput(ctx, kStep);
      const bool nesterov = ctx.attr<bool>("nesterov");
      if (!(mu >= 0) || !(damp >= 0 && damp <= 1) || !(wd >= 0) ||
          !(step >= 1)) {
        return ctx.InvalidArgument(
            "momentum and weight_decay must be >= 0, dampening in [0, 1] "
            "and step >= 1; got momentum ",
            mu, ", dampening ", damp, ", weight_decay ", wd, ", step ", step);
      }
      if (nesterov && (mu <= 0 || damp != 0)) {
        return ctx.InvalidArgument(
            "Nesterov momentum requires a momentum > 0 and zero dampening; "
            "got momentum ",
            mu, ", dampening ", damp);
      }
      const Tensor grad = InputFloat32(ctx, kGrad);
      ASSIGN_OR_RETURN(const Tensor w, ReadFloat32(ctx, *var));
      ASSIGN_OR_RETURN(const Tensor buf, ReadFloat32(ctx, *buf_var));
      const Tensor delta(DType::kFloat32, var->shape());
      const bool first = step < 1.5f;
      ParallelForShard(ctx, shard, delta.NumElements(), kApplyCost,
                       [&](int64_t b, int64_t e) {
                         const Eigen::ArrayXf d = Widen<float>(grad, b, e) +
                                                  wd * Widen<float>(w, b, e);
                         ArrayMap<float> out = Block<float>(delta, b, e);
                         if (mu == 0) {
                           out = lr * d;
                           return;
                         }
                         ArrayMap<float> bb = Block<float>(buf, b, e);
                         if (first) {
                           bb = d;
                         } else {
                           bb = mu * bb + (1 - damp) * d;
                         }
                         out = nesterov ? (lr * (d + mu * bb)).eval()
                                        : (lr * bb).eval();
                       });
      if (mu != 0) RETURN_IF_ERROR(StoreFloat32(ctx, 1, buf, buf_var));
      return SubtractFromVariable(ctx, 0, delta, var, shard);
    })
    .NotDifferentiable("it updates variables and has no outputs");

}  // namespace sgd
}  // namespace

Node* ApplySGD(const Scope& scope, Output var, Output buf, Output lr,
               Output momentum, Output dampening, Output weight_decay,
               Output step, Output grad, bool nesterov, Output shard) {
  std::vector<Output> rest = {buf,          lr,   momentum, dampening,
                              weight_decay, step, grad};
  if (shard.valid()) rest.push_back(shard);
  return AddHandleNode(scope, "ApplySGD", var, std::move(rest),
                       {{"nesterov", nesterov}});
}

}  // namespace ipuflow::ops
