// Conv2D as GEMM: the convolution geometry shared by Conv2D and its two
// backprop ops, and the patch copies (im2col / col2im) that turn a
// convolution into one matrix product per block of output rows.
//
//   // y[rows*OW, OC] = cols[rows*OW, KH*KW*C] * filter[KH*KW*C, OC]
//   Im2Col(x, g, r0, r1, cols.data());
//
// An output "row" is one (image, output row oh) pair, flattened as
// n * OH + oh; its OW pixels are contiguous in an NHWC output.
//
// Thread safety: pure functions; distinct row ranges may be processed
// concurrently, except by Col2ImAdd into the same image.
#ifndef IPUFLOW_OPS_NN_CONV_UTIL_H_
#define IPUFLOW_OPS_NN_CONV_UTIL_H_

#include <algorithm>
#include <cstdint>
#include <map>
#include <utility>

#include "Eigen/Core"
#include "absl/status/statusor.h"
#include "core/kernel.h"
#include "core/mutex.h"
#include "core/op_registry.h"
#include "core/tensor_shape.h"
#include "ops/nn/window_2d.h"

namespace ipuflow::ops {

using RowMajorMatrix =
    Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MatrixMap = Eigen::Map<RowMajorMatrix>;
using ConstMatrixMap = Eigen::Map<const RowMajorMatrix>;

// The window of a convolution of `input` (rank 4, in a.format) by `filter`
// ([kh, kw, in, out]); errors name both shapes and the data format.
// `out_channels` receives filter's out dim (may be -1).
absl::StatusOr<Window2D> ConvWindow(const TensorShape& input,
                                    const TensorShape& filter,
                                    const WindowAttrs& a,
                                    int64_t* out_channels);

// For the shape functions of Conv2D and its backprops: checks inputs 0
// (input) and 1 (filter) are float32 or float16 alike, of rank 4, and the
// partials_type; parses the attributes into `a` and returns the window
// (out_channels from the filter).
absl::StatusOr<Window2D> ConvShapeWindow(const ShapeContext& c, WindowAttrs* a,
                                         int64_t* out_channels);
// The same at run time, from the kernel's inputs 0 and 1; errors name the
// node.
absl::StatusOr<Window2D> ConvKernelWindow(const KernelContext& ctx,
                                          WindowAttrs* a,
                                          int64_t* out_channels);

// The output shape of the convolution, in a.format (may hold -1).
TensorShape ConvOutputShape(const Window2D& g, int64_t out_channels,
                            const WindowAttrs& a);

// KH * KW * C: the length of one patch.
inline int64_t PatchSize(const Window2D& g) { return g.kh * g.kw * g.c; }

// How many output rows to process at once so that one chunk's patches
// stay under about 1 MiB (at least 1).
int64_t RowsPerChunk(const Window2D& g);

// Copies the patches of output rows [r0, r1) of NHWC `x` into `cols`
// ([(r1 - r0) * OW, PatchSize]), zero where a window covers padding.
void Im2Col(const float* x, const Window2D& g, int64_t r0, int64_t r1,
            float* cols);

// The adjoint of Im2Col: adds each patch entry of `cols` into the NHWC
// input position it was copied from (padding entries are dropped).
void Col2ImAdd(const float* cols, const Window2D& g, int64_t r0, int64_t r1,
               float* x);

// True when the patches are the input itself (1x1 window, stride 1).
inline bool IsPointwise(const Window2D& g) {
  return g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1;
}

// The im2col / col2im loops of the GEMM paths, with the matrix product as
// a parameter: Eigen's (float partials, conv2d*.cc) or the float16-partials
// emulation (conv_half_partials.h). Work is shared over the intra-op pool.

// y = patches(x) * w by blocks of output rows: product(patches [m, k],
// w [k, oc], y's block [m, oc]) writes each block.
template <typename Product>
void ConvForwardByBlocks(const KernelContext& ctx, const float* x,
                         const float* w, float* y, const Window2D& g,
                         int64_t oc, Product product) {
  const int64_t k = PatchSize(g);
  const ConstMatrixMap wm(w, k, oc);
  const int64_t chunk = RowsPerChunk(g);
  ctx.ParallelFor(g.n * g.oh, 2.0 * g.ow * k * oc, [&](int64_t b, int64_t e) {
    RowMajorMatrix cols(std::min(chunk, e - b) * g.ow, k);
    for (int64_t r0 = b; r0 < e; r0 += chunk) {
      const int64_t r1 = std::min(e, r0 + chunk), m = (r1 - r0) * g.ow;
      Im2Col(x, g, r0, r1, cols.data());
      product(cols.topRows(m), wm, MatrixMap(y + r0 * g.ow * oc, m, oc));
    }
  });
}

// dx one image per task (Col2ImAdd of one image is not concurrent): each
// block's patches = product(dy's block [m, oc], w^T [oc, k]) are added back
// into dx; finish_image(image's dx, its size) runs after each image.
template <typename Product, typename FinishImage>
void ConvBackpropInputByBlocks(const KernelContext& ctx, const float* dy,
                               const float* w, float* dx, const Window2D& g,
                               int64_t oc, Product product,
                               FinishImage finish_image) {
  const int64_t k = PatchSize(g);
  const ConstMatrixMap wm(w, k, oc);
  const int64_t chunk = std::min(RowsPerChunk(g), g.oh);
  const int64_t image = g.h * g.w * g.c;
  ctx.ParallelFor(g.n, 2.0 * g.oh * g.ow * k * oc, [&](int64_t b, int64_t e) {
    RowMajorMatrix cols(chunk * g.ow, k);
    for (int64_t n = b; n < e; ++n) {
      std::fill(dx + n * image, dx + (n + 1) * image, 0.0f);
      for (int64_t r0 = n * g.oh; r0 < (n + 1) * g.oh; r0 += chunk) {
        const int64_t r1 = std::min((n + 1) * g.oh, r0 + chunk);
        const int64_t m = (r1 - r0) * g.ow;
        product(ConstMatrixMap(dy + r0 * g.ow * oc, m, oc), wm.transpose(),
                cols.topRows(m));
        Col2ImAdd(cols.data(), g, r0, r1, dx);
      }
      finish_image(dx + n * image, image);
    }
  });
}

// dw = the sum over blocks of output rows of patches^T * dy:
// accumulate(patches^T [k, m], dy's block [m, oc], sum [k, oc]) adds one
// block into its shard's sum; merge(dw, sum) adds the shards' sums in
// shard order, so the result does not depend on timing.
template <typename Accumulate, typename Merge>
void ConvBackpropFilterByBlocks(const KernelContext& ctx, const float* x,
                                const float* dy, float* dw, const Window2D& g,
                                int64_t oc, Accumulate accumulate,
                                Merge merge) {
  const int64_t k = PatchSize(g);
  const int64_t chunk = RowsPerChunk(g);
  Mutex mu;
  std::map<int64_t, RowMajorMatrix> partials;
  ctx.ParallelFor(g.n * g.oh, 2.0 * g.ow * k * oc, [&](int64_t b, int64_t e) {
    RowMajorMatrix sum = RowMajorMatrix::Zero(k, oc);
    RowMajorMatrix cols(IsPointwise(g) ? 0 : std::min(chunk, e - b) * g.ow, k);
    for (int64_t r0 = b; r0 < e; r0 += chunk) {
      const int64_t r1 = std::min(e, r0 + chunk), m = (r1 - r0) * g.ow;
      const ConstMatrixMap dym(dy + r0 * g.ow * oc, m, oc);
      if (IsPointwise(g)) {  // The patches are x's rows.
        accumulate(ConstMatrixMap(x + r0 * g.ow * k, m, k).transpose(), dym,
                   sum);
      } else {
        Im2Col(x, g, r0, r1, cols.data());
        accumulate(cols.topRows(m).transpose(), dym, sum);
      }
    }
    MutexLock l(&mu);
    partials.emplace(b, std::move(sum));
  });
  MatrixMap dwm(dw, k, oc);
  dwm.setZero();
  for (const auto& [begin, sum] : partials) merge(dwm, sum);
}

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_NN_CONV_UTIL_H_
