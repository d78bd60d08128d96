// MaxPool2D: the maximum over each 2-D window of a batch of images, and
// MaxPoolGrad, its gradient (dy routed to the first maximum of each window).
//
//   Output x = ops::Placeholder(scope, DType::kFloat32, {-1, 28, 28, 32});
//   // [?,14,14,32]:
//   Output y = ops::MaxPool2D(scope, x, {2, 2}, {2, 2}, "VALID");
//   Output z = ops::MaxPool2D(scope, x_nchw, {1, 1, 3, 3}, {1, 1, 2, 2},
//                             "SAME", "NCHW");
//
// `ksize` and `strides` are [h, w] or, like TensorFlow, one entry per
// dimension in the data format's order with 1 for batch and channels. SAME
// padding never contributes a value (padding is not zero, it is absent).
// float32 or float16 (widened to float32 and rounded back: exact, as the
// maximum of float16 values is one of them); MaxPoolGrad's inputs share a
// dtype.
#ifndef IPUFLOW_OPS_NN_MAX_POOL_2D_H_
#define IPUFLOW_OPS_NN_MAX_POOL_2D_H_

#include <cstdint>
#include <string>
#include <vector>

#include "core/scope.h"

namespace ipuflow::ops {

Output MaxPool2D(const Scope& scope, Output x,
                 const std::vector<int64_t>& ksize,
                 const std::vector<int64_t>& strides,
                 const std::string& padding,
                 const std::string& data_format = "NHWC");

// dx for y = MaxPool2D(x) with the same attributes, given dy.
Output MaxPoolGrad(const Scope& scope, Output x, Output y, Output dy,
                   const std::vector<int64_t>& ksize,
                   const std::vector<int64_t>& strides,
                   const std::string& padding,
                   const std::string& data_format = "NHWC");

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_NN_MAX_POOL_2D_H_
