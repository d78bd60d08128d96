// Fill, ZerosLike and OnesLike: tensors of one repeated value.
//
//   Output z = ops::Fill(scope, {2, 3}, 0.5f);          // float32[2,3] of 0.5
//   Output ones = ops::OnesLike(scope, logits);           // same dtype/shape
#ifndef IPUFLOW_OPS_ARRAY_FILL_H_
#define IPUFLOW_OPS_ARRAY_FILL_H_

#include "core/scope.h"

namespace ipuflow::ops {

// A tensor of `shape` (fully defined) with every element `value`.
Output Fill(const Scope& scope, const TensorShape& shape, double value,
            DType dtype = DType::kFloat32);
Output ZerosLike(const Scope& scope, Output x);
Output OnesLike(const Scope& scope, Output x);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_ARRAY_FILL_H_
