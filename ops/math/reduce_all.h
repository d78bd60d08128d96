// ReduceAll: whether every element of x over `axes` is true (true over zero
// elements). `axes` and `keep_dims` as ReduceSum (every axis when empty). bool
// in, bool out, as tf.reduce_all.
//
//   Output ok = ops::ReduceAll(scope, Less(scope, err, tol));  // bool scalar
#ifndef IPUFLOW_OPS_MATH_REDUCE_ALL_H_
#define IPUFLOW_OPS_MATH_REDUCE_ALL_H_

#include <cstdint>
#include <vector>

#include "core/scope.h"

namespace ipuflow::ops {

Output ReduceAll(const Scope& scope, Output x, std::vector<int64_t> axes = {},
                 bool keep_dims = false);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_MATH_REDUCE_ALL_H_
