// ReduceAny: whether any element of x over `axes` is true (false over zero
// elements). `axes` and `keep_dims` as ReduceSum (every axis when empty). bool
// in, bool out, as tf.reduce_any.
//
//   Output seen = ops::ReduceAny(scope, Greater(scope, x, limit), {1});
#ifndef IPUFLOW_OPS_MATH_REDUCE_ANY_H_
#define IPUFLOW_OPS_MATH_REDUCE_ANY_H_

#include <cstdint>
#include <vector>

#include "core/scope.h"

namespace ipuflow::ops {

Output ReduceAny(const Scope& scope, Output x, std::vector<int64_t> axes = {},
                 bool keep_dims = false);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_MATH_REDUCE_ANY_H_
