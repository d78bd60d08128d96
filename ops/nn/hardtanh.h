// Hardtanh: y = min(max(x, min_val), max_val), element-wise; float32/float16
// (torch.nn.Hardtanh, -1 and 1 by default; ReLU6 is Hardtanh(0, 6), as
// tf.nn.relu6). NaN stays NaN. HardtanhGrad(x, dy) = dy where min_val < x
// < max_val, 0 elsewhere, 0 at the bounds (PyTorch's and TensorFlow's
// relu6 rule).
//
//   Output y = ops::Hardtanh(scope, x);
#ifndef IPUFLOW_OPS_NN_HARDTANH_H_
#define IPUFLOW_OPS_NN_HARDTANH_H_

#include "core/scope.h"

namespace ipuflow::ops {

Output Hardtanh(const Scope& scope, Output x, float min_val = -1.0f,
                float max_val = 1.0f);
// ReLU6: y = min(max(x, 0), 6) = Hardtanh(x, 0, 6) (tf.nn.relu6,
// torch.nn.ReLU6).
Output Relu6(const Scope& scope, Output x);
// dx for Hardtanh(x) given dy (what its gradient builds).
Output HardtanhGrad(const Scope& scope, Output x, Output dy,
                    float min_val = -1.0f, float max_val = 1.0f);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_NN_HARDTANH_H_
