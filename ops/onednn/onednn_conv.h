// Conv2D, GroupedConv2D and their gradients through oneDNN's convolution
// primitives, in ipuflow's layouts: activations NHWC, filters HWIO ([kh,
// kw, in / groups, out], output channel o in group o / (out / groups)).
// The batch is split over an ipuflow intra-op pool (and the caller), each
// share one single-threaded primitive execution (onednn.h); primitives are
// created once per shape and kind and cached for the process's life.
//
//   onednn::ConvDims d{/*n=*/40, 12, 12, /*c=*/10, /*oc=*/20, /*kh=*/5, 5,
//                      /*sh=*/1, 1, /*oh=*/8, 8, /*pad_top=*/0, 0};
//   RETURN_IF_ERROR(onednn::ConvForward(ctx.intra_op(), x, w, y, d));
//
// Results match the im2col + GEMM path up to float rounding (oneDNN sums in
// another order). The split of the batch depends only on the pool's size,
// and ConvBackwardWeights adds the shares' partial sums in share order, so
// a result depends on the thread count but never on timing.
//
// Thread safety: stateless apart from the primitive cache; safe from any
// thread.
#ifndef IPUFLOW_OPS_ONEDNN_ONEDNN_CONV_H_
#define IPUFLOW_OPS_ONEDNN_ONEDNN_CONV_H_

#include <cstdint>

#include "absl/status/status.h"
#include "core/thread_pool.h"

namespace ipuflow::ops::onednn {

// The geometry of y [n, oh, ow, oc] = conv(x [n, h, w, c], w [kh, kw,
// c / groups, oc]) with strides (sh, sw), dilations (dil_h, dil_w; 1 is
// none) and the window's top-left corner at (-pad_top, -pad_left): TF's
// SAME or VALID, as ops/nn/window_2d.h's Window2D.
struct ConvDims {
  int64_t n = 0, h = 0, w = 0, c = 0;
  int64_t oc = 0, kh = 0, kw = 0;
  int64_t sh = 1, sw = 1;
  int64_t oh = 0, ow = 0;
  int64_t pad_top = 0, pad_left = 0;
  int64_t groups = 1, dil_h = 1, dil_w = 1;
  int64_t FilterElements() const { return kh * kw * (c / groups) * oc; }
};

// y = conv(x, w). Errors (Internal) only if oneDNN refuses the shape.
absl::Status ConvForward(const ThreadPool& pool, const float* x, const float* w,
                         float* y, const ConvDims& d);

// dx [n, h, w, c] = conv^T(dy, w): the gradient of <dy, conv(x, w)> with
// respect to x (zero where no window reaches).
absl::Status ConvBackwardData(const ThreadPool& pool, const float* dy,
                              const float* w, float* dx, const ConvDims& d);

// dw [kh, kw, c / groups, oc] = sum over output pixels of patch(x)^T dy.
absl::Status ConvBackwardWeights(const ThreadPool& pool, const float* x,
                                 const float* dy, float* dw, const ConvDims& d);

// The number of primitive sets in the cache (for tests: a repeated call
// of a shape adds none).
int64_t CachedConvPrimitives();

}  // namespace ipuflow::ops::onednn

#endif  // IPUFLOW_OPS_ONEDNN_ONEDNN_CONV_H_
