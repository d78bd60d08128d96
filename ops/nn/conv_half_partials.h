// Conv2D, Conv2DBackpropInput and Conv2DBackpropFilter with partials_type
// "half" (ops/math/partials_type.h): the im2col + GEMM kernels of
// conv2d.cc and conv2d_backprop.cc, with the running sum along each
// product's reduced dimension rounded to float16 after every
// kHalfPartialsBlock terms. All tensors are float32 NHWC (float16 tensors
// are widened before and rounded after, as for float partials).
//
//   if (HalfPartials(ctx.node())) ConvForwardHalfPartials(ctx, x, w, y, g, oc);
//
// The reduced dimension: the patch (kh * kw * c) for the forward pass; the
// output channels for the input gradient (whose overlapping patches are
// then added in float32 and rounded once per image); the output pixels
// (n * oh * ow) for the filter gradient (each shard's sum, then the shard
// sums added in order, rounded after each). Slower than float partials
// (one GEMM per block): an emulation of the device's numerics, not a fast
// path.
//
// Thread safety: pure functions over the kernel's intra-op pool.
#ifndef IPUFLOW_OPS_NN_CONV_HALF_PARTIALS_H_
#define IPUFLOW_OPS_NN_CONV_HALF_PARTIALS_H_

#include <cstdint>

#include "core/kernel.h"
#include "ops/nn/window_2d.h"

namespace ipuflow::ops {

// y [n, oh, ow, oc] = conv(x [n, h, w, c], w [kh, kw, c, oc]).
void ConvForwardHalfPartials(const KernelContext& ctx, const float* x,
                             const float* w, float* y, const Window2D& g,
                             int64_t oc);
// dx [n, h, w, c] = conv^T(dy [n, oh, ow, oc], w).
void ConvBackpropInputHalfPartials(const KernelContext& ctx, const float* dy,
                                   const float* w, float* dx, const Window2D& g,
                                   int64_t oc);
// dw [kh, kw, c, oc] = sum over output pixels of patch(x)^T dy.
void ConvBackpropFilterHalfPartials(const KernelContext& ctx, const float* x,
                                    const float* dy, float* dw,
                                    const Window2D& g, int64_t oc);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_NN_CONV_HALF_PARTIALS_H_
