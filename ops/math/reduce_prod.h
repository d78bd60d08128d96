// ReduceProd: the product of x over `axes` (every axis when empty; negative
// axes count from the end), `keep_dims` as ReduceSum. float32 and float16
// (multiplied in float32, rounded once); the product over zero elements is 1.
//
//   Output p = ops::ReduceProd(scope, x, {1});  // [N,C] -> [N]
//
// tf.reduce_prod / torch.prod, floats only (a signed integer product
// overflows). The gradient is the product of the other elements, exact
// where x holds zeros: y / x where a row has none, the product of the
// non-zero elements at a row's only zero, 0 elsewhere.
#ifndef IPUFLOW_OPS_MATH_REDUCE_PROD_H_
#define IPUFLOW_OPS_MATH_REDUCE_PROD_H_

#include <cstdint>
#include <vector>

#include "core/scope.h"

namespace ipuflow::ops {

Output ReduceProd(const Scope& scope, Output x, std::vector<int64_t> axes = {},
                  bool keep_dims = false);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_MATH_REDUCE_PROD_H_
