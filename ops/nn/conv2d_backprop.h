// Conv2DBackpropInput and Conv2DBackpropFilter: the gradients of Conv2D
// with respect to its input (a transposed convolution, by GEMM + col2im)
// and to its filter (patches^T x dy, by im2col + GEMM).
//
//   Output y = ops::Conv2D(scope, x, w, {2, 2}, "SAME");
//   Output dx = ops::Conv2DBackpropInput(scope, x, w, dy, {2, 2}, "SAME");
//   Output dw = ops::Conv2DBackpropFilter(scope, x, w, dy, {2, 2}, "SAME");
//
// Both take Conv2D's input and filter (one of them only for its run-time
// shape) and dy, the gradient of Conv2D's output, with Conv2D's attributes.
// They are differentiable (for second-order gradients), as both are linear.
// float32 or float16 (all three inputs alike), computed in float32 and
// rounded once; ConvOptions (conv2d.h) carries data_format and
// partials_type, which Conv2D's gradient passes on.
#ifndef IPUFLOW_OPS_NN_CONV2D_BACKPROP_H_
#define IPUFLOW_OPS_NN_CONV2D_BACKPROP_H_

#include <cstdint>
#include <string>
#include <vector>

#include "core/scope.h"
#include "ops/nn/conv2d.h"

namespace ipuflow::ops {

// d(Conv2D)/d(input) applied to dy; the result has input's shape (input's
// values are not read).
Output Conv2DBackpropInput(const Scope& scope, Output input, Output filter,
                           Output dy, const std::vector<int64_t>& strides,
                           const std::string& padding,
                           const ConvOptions& options);
Output Conv2DBackpropInput(const Scope& scope, Output input, Output filter,
                           Output dy, const std::vector<int64_t>& strides,
                           const std::string& padding,
                           const std::string& data_format = "NHWC");
// d(Conv2D)/d(filter) applied to dy; the result has filter's shape
// (filter's values are not read).
Output Conv2DBackpropFilter(const Scope& scope, Output input, Output filter,
                            Output dy, const std::vector<int64_t>& strides,
                            const std::string& padding,
                            const ConvOptions& options);
Output Conv2DBackpropFilter(const Scope& scope, Output input, Output filter,
                            Output dy, const std::vector<int64_t>& strides,
                            const std::string& padding,
                            const std::string& data_format = "NHWC");

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_NN_CONV2D_BACKPROP_H_
