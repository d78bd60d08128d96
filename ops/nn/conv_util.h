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

#include <cstdint>

#include "Eigen/Core"
#include "absl/status/statusor.h"
#include "core/kernel.h"
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

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_NN_CONV_UTIL_H_
