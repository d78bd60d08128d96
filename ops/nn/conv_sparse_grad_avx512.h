// The AVX-512 inner loops of conv_sparse_grad.h's kernels, one image at a
// time, over raw pointers (this library cannot depend on //ops/nn:nn; the
// callers there choose it when ipuflow::UsedIsa() is kAvx512).
//
//   SparseConvGradShape s = ...;  // From the Window2D and the patch layout.
//   std::fill(dx_image, dx_image + s.h * s.w * s.c, 0.0f);
//   SparseConvBackpropInputImageAvx512(s, dy_image, wt, dx_image, ...);
//
// The input gradient: a window row of kw * c floats is ceil(row / 16)
// zmm vectors, the last one masked (masked-off lanes are neither read nor
// written); a pixel's nonzero channels and their filter rows are
// compressed 16 channels at a time. The filter gradient: 8-float vectors
// (AVX-512VL, 32 registers), the row ending with a whole vector that
// overlaps its predecessor (both compute the overlap alike). Every output
// element gets the same fused multiply-adds in the same order as in the
// AVX2 loops of conv_sparse_grad.cc, so both give bitwise equal results.
// More accumulators than AVX2's: a block holds up to six window rows
// (different outputs, so no order changes) to hide the FMA latency of the
// short sums (a dozen nonzeros per channel and image), and its layout is
// planned once per image. Which kernel takes these loops and what they
// measured: conv_sparse_grad.h.
//
// Thread safety: pure functions; each writes only its output and scratch.
#ifndef IPUFLOW_OPS_NN_CONV_SPARSE_GRAD_AVX512_H_
#define IPUFLOW_OPS_NN_CONV_SPARSE_GRAD_AVX512_H_

#include <cstdint>

namespace ipuflow::ops {

// One image's convolution (VALID, NHWC input [h, w, c], HWIO filter, oc
// output channels) and the kernels' patch layout: a filter (or filter
// gradient) channel is kh rows of `row` = kw * c floats, row r at
// r * row_pad, `size` = kh * row_pad floats per channel.
struct SparseConvGradShape {
  int64_t h, w, c;
  int64_t kh, kw, sh, sw;
  int64_t oh, ow, oc;
  int64_t row, row_pad, size;
};

// dx_image += conv^T(dy_image [oh, ow, oc], wt [oc][patch layout]), the
// pixels column by column (ox outer, oy inner), each pixel's nonzero
// channels in channel order. Scratch: channel holds oc entries, value
// and rows oc + 16.
void SparseConvBackpropInputImageAvx512(const SparseConvGradShape& s,
                                        const float* dy_image, const float* wt,
                                        float* dx_image, int* channel,
                                        float* value, const float** rows);

// sum [oc][patch layout] += patch(x_image)^T dy_image over the nonzero
// entries of dy_image, in pixel order (oy outer, ox inner) per channel.
// Reads and writes no padding of sum beyond each row. Scratch: window
// holds oh * ow entries, src and value oc * oh * ow + 16, count oc.
void SparseConvBackpropFilterImageAvx512(const SparseConvGradShape& s,
                                         const float* x_image,
                                         const float* dy_image, float* sum,
                                         const float** window,
                                         const float** src, float* value,
                                         int64_t* count);

// The fraction of nonzero (or NaN) entries among dy's n floats (0 for
// n <= 0), as conv_sparse_grad.h's NonzeroFraction.
double NonzeroFractionAvx512(const float* dy, int64_t n);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_NN_CONV_SPARSE_GRAD_AVX512_H_
