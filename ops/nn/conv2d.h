// Conv2D: 2-D convolution (cross-correlation, as in TensorFlow) of a batch
// of images by a filter [kh, kw, in_channels, out_channels].
//
//   Output x = ops::Placeholder(scope, DType::kFloat32, {-1, 28, 28, 1});
//   Output w = ops::Const(scope, RandomFilter({5, 5, 1, 32}));
//   Output y = ops::Conv2D(scope, x, w, {1, 1}, "SAME");      // [?,28,28,32]
//   Output z = ops::Conv2D(scope, y_nchw, w2, {2, 2}, "VALID", "NCHW");
//
// `strides` is [sh, sw] or, like TensorFlow, one entry per dimension in the
// data format's order with 1 for batch and channels. Padding "SAME" pads
// with zeros so that out = ceil(in / stride); "VALID" does not pad.
// float32, or float16 computed in float32 and rounded once (input and
// filter must share a dtype). ConvOptions::partials_type "half" makes the
// running sums over each patch float16 (ops/math/partials_type.h). The
// gradients are the ops of conv2d_backprop.h, with the same partials_type.
//
//   Output y16 = ops::Conv2D(scope, x16, w16, {1, 1}, "VALID",
//                            {.partials_type = "half"});
#ifndef IPUFLOW_OPS_NN_CONV2D_H_
#define IPUFLOW_OPS_NN_CONV2D_H_

#include <cstdint>
#include <string>
#include <vector>

#include "core/scope.h"

namespace ipuflow::ops {

// The attributes of Conv2D and its backprops besides strides and padding.
struct ConvOptions {
  std::string data_format = "NHWC";     // or "NCHW"
  std::string partials_type = "float";  // or "half"
};

// The options of a Conv2D or backprop node (gradients pass them on).
ConvOptions ConvOptionsOf(const Node& op);

Output Conv2D(const Scope& scope, Output input, Output filter,
              const std::vector<int64_t>& strides, const std::string& padding,
              const ConvOptions& options);
Output Conv2D(const Scope& scope, Output input, Output filter,
              const std::vector<int64_t>& strides, const std::string& padding,
              const std::string& data_format = "NHWC");

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_NN_CONV2D_H_
