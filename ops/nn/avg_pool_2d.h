// AvgPool2D: the mean over each 2-D window of a batch of images, and
// AvgPoolGrad, its gradient (dy spread evenly over each window).
//
//   Output x = ops::Placeholder(scope, DType::kFloat32, {-1, 8, 8, 64});
//   // [?,4,4,64], then a global average: [?,1,1,64]
//   Output y = ops::AvgPool2D(scope, x, {2, 2}, {2, 2}, "VALID");
//   Output g = ops::AvgPool2D(scope, y, {4, 4}, {1, 1}, "VALID");
//
// `ksize` and `strides` are [h, w] or, like TensorFlow, one entry per
// dimension in the data format's order with 1 for batch and channels. With
// SAME padding a window's mean is over its valid elements only (as in
// TensorFlow). float32, or float16 computed in float32 and rounded once.
#ifndef IPUFLOW_OPS_NN_AVG_POOL_2D_H_
#define IPUFLOW_OPS_NN_AVG_POOL_2D_H_

#include <cstdint>
#include <string>
#include <vector>

#include "core/scope.h"

namespace ipuflow::ops {

Output AvgPool2D(const Scope& scope, Output x,
                 const std::vector<int64_t>& ksize,
                 const std::vector<int64_t>& strides,
                 const std::string& padding,
                 const std::string& data_format = "NHWC");

// dx for y = AvgPool2D(x) with the same attributes, given dy; `x` only
// gives dx's shape (its values are not read).
Output AvgPoolGrad(const Scope& scope, Output x, Output dy,
                   const std::vector<int64_t>& ksize,
                   const std::vector<int64_t>& strides,
                   const std::string& padding,
                   const std::string& data_format = "NHWC");

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_NN_AVG_POOL_2D_H_
