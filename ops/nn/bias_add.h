// BiasAdd: value + bias, with bias [C] added along the channel dimension
// (the last for "NHWC", dimension 1 for "NCHW"); BiasAddGrad: its gradient
// wrt bias, dy summed over every dimension but the channels. value has rank
// >= 2; float32 and float16.
//
//   Output y = ops::BiasAdd(scope, ops::MatMul(scope, x, w), b);  // [N,C]
//   Output z = ops::BiasAdd(scope, conv_nchw, b, "NCHW");  // [N,C,H,W]
//   Output db = ops::BiasAddGrad(scope, dz, "NCHW");       // [C]
#ifndef IPUFLOW_OPS_NN_BIAS_ADD_H_
#define IPUFLOW_OPS_NN_BIAS_ADD_H_

#include <string>

#include "core/scope.h"

namespace ipuflow::ops {

Output BiasAdd(const Scope& scope, Output value, Output bias,
               const std::string& data_format = "NHWC");
Output BiasAddGrad(const Scope& scope, Output dy,
                   const std::string& data_format = "NHWC");

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_NN_BIAS_ADD_H_
