#include "ops/state/apply_util.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/half.h"
#include "core/half_rounding.h"

namespace ipuflow::ops {
namespace {

absl::Status AdamFamilyShape(ShapeContext& c) {
  ASSIGN_OR_RETURN(float wd, c.attr<float>("weight_decay"));
  if (!(wd >= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("weight_decay must be >= 0, got ", wd));
  }
  RETURN_IF_ERROR(ExpectHandle(c, AdamInput::kVar));
  RETURN_IF_ERROR(c.ExpectDType(AdamInput::kM, DType::kResource));
  RETURN_IF_ERROR(c.ExpectDType(AdamInput::kV, DType::kResource));
  RETURN_IF_ERROR(c.ExpectFloat(AdamInput::kGrad));
  RETURN_IF_ERROR(ExpectMatchesVariable(c, AdamInput::kGrad));
  for (int i : {AdamInput::kLr, AdamInput::kBeta1, AdamInput::kBeta2,
                AdamInput::kEpsilon, AdamInput::kStep}) {
    RETURN_IF_ERROR(ExpectFloatScalar(c, i));
  }
  return ExpectShardInput(c, AdamInput::kShard);
}

// Elements per task of the conversions (cheap: one F16C instruction per 8).
constexpr double kConvertCost = 1.0;

Tensor WidenToFloat32(const KernelContext& ctx, const Tensor& t) {
  Tensor out(DType::kFloat32, t.shape());
  const half* src = t.data<half>();
  float* dst = out.data<float>();
  ctx.ParallelFor(t.NumElements(), kConvertCost, [&](int64_t b, int64_t e) {
    WidenHalf(src + b, dst + b, e - b);
  });
  return out;
}

}  // namespace

Tensor InputFloat32(const KernelContext& ctx, int i) {
  const Tensor& t = ctx.input(i);
  return t.dtype() == DType::kFloat16 ? WidenToFloat32(ctx, t) : t;
}

absl::StatusOr<Tensor> ReadFloat32(const KernelContext& ctx,
                                   const VariableResource& var) {
  ASSIGN_OR_RETURN(Tensor t, ReadCopy(ctx, var));
  if (t.dtype() == DType::kFloat16) return WidenToFloat32(ctx, t);
  return t;
}

absl::Status StoreFloat32(const KernelContext& ctx, int key,
                          const Tensor& value, VariableResource* var) {
  if (var->dtype() != DType::kFloat16) {
    return WithNodeName(ctx, var->Assign(value));
  }
  Tensor rounded(DType::kFloat16, value.shape());
  const float* src = value.data<float>();
  half* dst = rounded.data<half>();
  ctx.ParallelFor(value.NumElements(), kConvertCost, [&](int64_t b, int64_t e) {
    RoundToHalf(ctx, key, src + b, dst + b, e - b, b);
  });
  return WithNodeName(ctx, var->Assign(rounded));
}

absl::Status SubtractFromVariable(const KernelContext& ctx, int key,
                                  const Tensor& delta, VariableResource* var,
                                  const UpdateShard& shard) {
  const int64_t n = delta.NumElements();
  const int64_t begin = shard.Begin(n), end = shard.End(n);
  if (var->dtype() != DType::kFloat16) {
    if (!shard.sharded()) return WithNodeName(ctx, var->AssignAdd(delta, -1));
    // delta has var's shape (the kernels allocate it so).
    return WithNodeName(ctx, var->Update([&](Tensor& w) {
      ctx.ParallelFor(end - begin, kCwiseCost, [&](int64_t b, int64_t e) {
        Block<float>(w, begin + b, begin + e) -=
            Widen<float>(delta, begin + b, begin + e);
      });
    }));
  }
  // Elements outside the shard are widened and rounded back unchanged
  // (exact: a float16 value is a float32 value).
  ASSIGN_OR_RETURN(Tensor w, ReadFloat32(ctx, *var));
  ctx.ParallelFor(end - begin, kCwiseCost, [&](int64_t b, int64_t e) {
    Block<float>(w, begin + b, begin + e) -=
        Widen<float>(delta, begin + b, begin + e);
  });
  return StoreFloat32(ctx, key, w, var);
}

absl::Status ExpectFloatVariable(const KernelContext& ctx,
                                 const VariableResource& var) {
  if (var.dtype() == DType::kFloat32 || var.dtype() == DType::kFloat16) {
    return absl::OkStatus();
  }
  return ctx.InvalidArgument("variable '", var.name(), "' is ",
                             DTypeName(var.dtype()),
                             "; optimizer updates need float32 or float16");
}

absl::StatusOr<AdamHyper> GetAdamHyper(const KernelContext& ctx) {
  AdamHyper h;
  h.lr = ScalarInput(ctx, AdamInput::kLr);
  h.beta1 = ScalarInput(ctx, AdamInput::kBeta1);
  h.beta2 = ScalarInput(ctx, AdamInput::kBeta2);
  h.epsilon = ScalarInput(ctx, AdamInput::kEpsilon);
  h.weight_decay = ctx.attr<float>("weight_decay");
  const float t = ScalarInput(ctx, AdamInput::kStep);
  if (!(0 <= h.beta1 && h.beta1 < 1 && 0 <= h.beta2 && h.beta2 < 1)) {
    return ctx.InvalidArgument("beta1 ", h.beta1, " and beta2 ", h.beta2,
                               " must be in [0, 1)");
  }
  if (!(h.epsilon >= 0) || !(t >= 1)) {
    return ctx.InvalidArgument("epsilon ", h.epsilon, " must be >= 0 and step ",
                               t, " >= 1 (steps count from 1)");
  }
  const double bc1 = 1 - std::pow(double{h.beta1}, double{t});
  h.bc1 = static_cast<float>(bc1);
  h.step_size = static_cast<float>(h.lr / bc1);
  h.sqrt_bc2 =
      static_cast<float>(std::sqrt(1 - std::pow(double{h.beta2}, double{t})));
  return h;
}

OpRegistration RegisterAdamFamilyOp(const std::string& name) {
  return OpRegistry::Global()
      ->Register(name)
      .Input("var")
      .Input("m")
      .Input("v")
      .Input("lr")
      .Input("grad")
      .Input("beta1")
      .Input("beta2")
      .Input("epsilon")
      .Input("step")
      .VariadicInput("shard")  // None, or one int32 [2] (update_shard.h).
      .RequiredAttr("dtype", AttrType::kDType)
      .RequiredAttr("shape", AttrType::kShape)
      .Attr("variable", "")
      .Attr("weight_decay", 0.0f)
      .SetStateful(ResourceAccess::kWrite)
      .SetShapeFn(AdamFamilyShape);
}

}  // namespace ipuflow::ops
