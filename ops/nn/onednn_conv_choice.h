// When Conv2D and its backprops run on oneDNN (ops/onednn/onednn_conv.h)
// rather than on conv_small.h's direct kernels or im2col + Eigen, and the
// window in oneDNN's terms. The choices follow side-by-side measurements of
// //ops/nn:conv_benchmark (BM_Conv2D* against BM_OnednnConv2D*, batch 40,
// one thread, AVX-512 machine), float partials only:
//   - forward: oneDNN beats im2col + Eigen on every shape measured (1.1-2.1x)
//     but not the direct kernels (the tutorial's 1->10 and 10->20 layers);
//   - filter gradient: oneDNN beats both except the direct kernel with more
//     than 16 output channels (10->20: 324 vs 407 us);
//   - input gradient: oneDNN's NHWC backward-data is 1.3-5x slower with up
//     to 8 input channels and 1.2-1.7x faster from 10.
// In the main example (examples/train_fashion_mnist.cc) these passes are
// most of stage 1's backward, the pipeline's longest item: per micro-batch
// of 40, oneDNN's backward-data for 10 -> 20 (jit:avx512_core, NHWC, primitive
// cached, only the 20 KB filter reordered, 4 us) takes 375 us, the direct
// filter gradient about 300 us (ONEDNN_VERBOSE=1 and perf, session 8). On
// the 2-vCPU EPYC a 512-bit FMA issues at about one per cycle, the rate of
// two 256-bit ones, so AVX-512 gains nothing here: AVX-512 variants of the
// direct kernels (2 packets of 16 for 20 channels, 1 padded packet for 10)
// measured 1.2-1.6x slower than their AVX2 versions, and a direct
// backward-data kernel (segments of kw x c floats per pixel, then a gather)
// 1.2-1.4x slower than oneDNN's, 440-520 vs 360 us (conv_benchmark's
// BM_B2_*, alternated): none of them is kept. Since then both backprops of
// 10 -> 20 go to conv_sparse_grad.h's kernels in the main example: its dy
// comes from 2x2 max pooling and ReLU, 17% nonzero, and skipping the zeros
// beats every dense kernel above (the choice here applies to dense dy).
//
//   if (UseOnednnConvForward(g, oc) &&
//       onednn::ConvForward(ctx.intra_op(), x, w, y, OnednnDims(g, oc)).ok())
//     return;
//
// Thread safety: pure functions.
#ifndef IPUFLOW_OPS_NN_ONEDNN_CONV_CHOICE_H_
#define IPUFLOW_OPS_NN_ONEDNN_CONV_CHOICE_H_

#include <cstdint>

#include "ops/nn/conv_small.h"
#include "ops/nn/window_2d.h"
#include "ops/onednn/onednn_conv.h"

namespace ipuflow::ops {

inline onednn::ConvDims OnednnDims(const Window2D& g, int64_t oc) {
  return {g.n,  g.h,  g.w,  g.c,  oc,        g.kh,      g.kw,
          g.sh, g.sw, g.oh, g.ow, g.pad_top, g.pad_left};
}

inline bool UseOnednnConvForward(const Window2D& g, int64_t oc) {
  return !UseSmallConv(g, oc);
}

inline bool UseOnednnConvBackpropFilter(const Window2D& g, int64_t oc) {
  return !UseSmallConv(g, oc) || oc <= 16;
}

inline bool UseOnednnConvBackpropInput(const Window2D& g, int64_t oc) {
  return g.c > 8;
}

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_NN_ONEDNN_CONV_CHOICE_H_
