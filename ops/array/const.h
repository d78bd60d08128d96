// Const and Placeholder: the two ways a value enters a graph from the host.
//
//   Output w = ops::Const(scope, Tensor::FromVector<float>({1, 2}, {1, 2}));
//   Output two = ops::Const(scope, 2.0f);                  // a float32 scalar
//   Output x = ops::Placeholder(scope, DType::kFloat32, {-1, 784});
#ifndef IPUFLOW_OPS_ARRAY_CONST_H_
#define IPUFLOW_OPS_ARRAY_CONST_H_

#include <vector>

#include "core/scope.h"
#include "core/tensor.h"

namespace ipuflow::ops {

Output Const(const Scope& scope, const Tensor& value);
Output Const(const Scope& scope, float value);
// A scalar of `dtype` (float16 and integers are converted from `value`).
Output Const(const Scope& scope, double value, DType dtype);
template <typename T>
Output Const(const Scope& scope, const std::vector<T>& values,
             const TensorShape& shape) {
  return Const(scope, Tensor::FromVector<T>(values, shape));
}

// A value fed at run time. Dimensions may be -1 (unknown until fed).
Output Placeholder(const Scope& scope, DType dtype, const TensorShape& shape);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_ARRAY_CONST_H_
