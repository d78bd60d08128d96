#include "ops/norm/norm_op_util.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "ops/math/float32_output.h"
#include "ops/math/half_io.h"

namespace ipuflow::ops {

absl::Status CheckEpsilon(float epsilon) {
  if (std::isfinite(epsilon) && epsilon >= 0) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("epsilon must be finite and >= 0, got ", epsilon));
}

absl::Status ExpectParamShape(const KernelContext& ctx, int input,
                              const TensorShape& shape) {
  const TensorShape& got = ctx.input(input).shape();
  if (got == shape) return absl::OkStatus();
  return ctx.InvalidArgument(
      "input '", ctx.node().op_def().input_names()[input], "' has shape ",
      got.DebugString(), ", expected ", shape.DebugString());
}

absl::Status OnlyOutputZeroDifferentiated(const Node& op,
                                          absl::Span<const Output> dy) {
  for (size_t i = 1; i < dy.size(); ++i) {
    if (dy[i].valid()) {
      return absl::UnimplementedError(absl::StrCat(
          op.DebugName(), ": output ", i,
          " (a statistic for the gradient) is not differentiable; "
          "compute the statistic with separate ops to differentiate it"));
    }
  }
  return absl::OkStatus();
}

absl::Status RunNormBackward(KernelContext& ctx, const NormLayout& layout,
                             const NormReplicas& replicas) {
  const Tensor& x = ctx.input(1);
  const Tensor dy32 = AsFloat32(ctx, ctx.input(0));
  const Tensor x32 = AsFloat32(ctx, x);
  const Tensor g32 = AsFloat32(ctx, ctx.input(2));
  Float32Output dx, dgamma, dbeta;
  RETURN_IF_ERROR(dx.Allocate(ctx, 0, x.shape()));
  RETURN_IF_ERROR(dgamma.Allocate(ctx, 1, ctx.input(2).shape()));
  RETURN_IF_ERROR(dbeta.Allocate(ctx, 2, ctx.input(2).shape()));
  if (x.NumElements() == 0) {
    std::fill_n(dgamma.data(), ctx.input(2).NumElements(), 0.0f);
    std::fill_n(dbeta.data(), ctx.input(2).NumElements(), 0.0f);
  } else {
    RETURN_IF_ERROR(NormBackward(
        ctx, layout, replicas, dy32.data<float>(), x32.data<float>(),
        g32.data<float>(), ctx.input(3).data<float>(),
        ctx.input(4).data<float>(), dx.data(), dgamma.data(), dbeta.data()));
  }
  dx.Finish(ctx);
  dgamma.Finish(ctx);
  dbeta.Finish(ctx);
  return absl::OkStatus();
}

}  // namespace ipuflow::ops
