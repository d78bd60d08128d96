// The kernel of the element-wise gradient ops of ops/nn (SigmoidGrad,
// TanhGrad, DropoutGrad; ReluGrad's is ops/math/vector_kernels.h's): two
// float inputs of one shape and dtype, one output of that shape, computed
// by an Eigen functor in parallel.
//
//   REGISTER_OP("TanhGrad").Input("y").Input("dy")
//       .SetShapeFn(shape_fns::SameShapeFloatPair)  // ops/shape_fns.h
//       .SetKernel([](KernelContext& ctx) {
//         return ElementwiseGradKernel(ctx, TanhGradFn());  // f(y, dy)
//       });
//
// Thread safety: stateless.
#ifndef IPUFLOW_OPS_NN_ELEMENTWISE_GRAD_H_
#define IPUFLOW_OPS_NN_ELEMENTWISE_GRAD_H_

#include "core/half.h"
#include "core/op_registry.h"
#include "ops/cwise.h"
#include "ops/math/half_binary.h"
#include "ops/shape_fns.h"

namespace ipuflow::ops {

// out = f(in0, in1) for same-shaped float inputs (float32 or float16); f
// maps two Eigen arrays of T to an array expression.
template <typename F>
absl::Status ElementwiseGradKernel(KernelContext& ctx, F f) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  if (a.shape() != b.shape()) {
    return ctx.InvalidArgument("inputs have shapes ", a.shape().DebugString(),
                               " and ", b.shape().DebugString(),
                               "; they must be equal");
  }
  // float16 in float32, rounded once per element (half_binary.h).
  if (a.dtype() == DType::kFloat16) return HalfBinaryKernel(ctx, f);
  IPUFLOW_SWITCH_FLOAT(a.dtype(), return (BinaryKernel<T, T>(ctx, f)),
                       return UnsupportedDType(ctx, a.dtype()));
}

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_NN_ELEMENTWISE_GRAD_H_
