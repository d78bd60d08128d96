// GroupedConv2D: 2-D convolution (cross-correlation, as TensorFlow's
// Conv2D) with dilation and channel groups, NHWC: input [N, H, W, C],
// filter [KH, KW, C / groups, OC]; output channel o reads the input
// channels of its group, o / (OC / groups) (PyTorch's nn.Conv2d groups,
// TensorFlow's grouped Conv2D). groups = C is a depthwise convolution
// (DepthwiseConv2D: filter [KH, KW, C, multiplier], as TensorFlow's
// depthwise_conv2d). Padding "SAME" (out = ceil(in / stride), the dilated
// window (K - 1) * d + 1 centred as TensorFlow does) or "VALID". Gradients
// for input and filter (GroupedConv2DBackpropInput / ...Filter; their own
// gradients are not implemented). All three run on oneDNN's convolution
// primitives (its grouped, depthwise and dilated kernels; the batch split
// over the intra-op pool as Conv2D's oneDNN path, ops/onednn/onednn_conv.h).
// Conv1D ([N, W, C] by [KW, C / groups, OC]) and ConvTranspose2D are builders
// over these and Conv2DBackpropInput. float32 and float16 (computed in float32,
// rounded once). Conv2D (conv2d.h) remains the fast path for groups 1 and no
// dilation.
//
//   Output y = ops::GroupedConv2D(scope, x, w, {.strides = {1, 1},
//                                               .dilations = {2, 2},
//                                               .groups = 4});
#ifndef IPUFLOW_OPS_NN_GROUPED_CONV_2D_H_
#define IPUFLOW_OPS_NN_GROUPED_CONV_2D_H_

#include <cstdint>
#include <string>
#include <vector>

#include "core/scope.h"

namespace ipuflow::ops {

struct GroupedConvOptions {
  std::vector<int64_t> strides = {1, 1};    // [sh, sw] (Conv1D: [sw]).
  std::vector<int64_t> dilations = {1, 1};  // [dh, dw] (Conv1D: [dw]).
  std::string padding = "VALID";            // or "SAME".
  int64_t groups = 1;
};

Output GroupedConv2D(const Scope& scope, Output input, Output filter,
                     const GroupedConvOptions& options = {});

// groups = C; filter [KH, KW, C, multiplier] (reshaped to
// [KH, KW, 1, C * multiplier]; output channel c * multiplier + m).
Output DepthwiseConv2D(const Scope& scope, Output input, Output filter,
                       const GroupedConvOptions& options = {});

// input [N, W, C], filter [KW, C / groups, OC]: GroupedConv2D on a height
// of 1. options' strides and dilations have one entry.
Output Conv1D(const Scope& scope, Output input, Output filter,
              const GroupedConvOptions& options = {});

// The transposed convolution (the gradient of Conv2D with respect to its
// input, applied to `input`): input [N, H, W, IC], filter [KH, KW, OC, IC]
// (TensorFlow's conv2d_transpose layout), output_shape [N, OH, OW, OC]
// fully defined, such that Conv2D of the output with `filter` at `strides`
// and `padding` has input's shape. A zero constant of output_shape stands
// for Conv2DBackpropInput's shape input (its values are not read).
Output ConvTranspose2D(const Scope& scope, Output input, Output filter,
                       const TensorShape& output_shape,
                       const std::vector<int64_t>& strides,
                       const std::string& padding);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_NN_GROUPED_CONV_2D_H_
