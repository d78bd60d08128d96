// OneHot: indices (int32 or int64) as one-hot vectors of length `depth`,
// inserted at `axis` (-1: a new last axis), as tf.one_hot:
//   y[..., i, ...] = on_value if indices[...] == i else off_value.
// An index outside [0, depth) (a padding id such as -1) gives a row of
// off_value, as TensorFlow does. `dtype` is the output's (f32, f16, i32,
// i64).
//
//   Output labels = ops::OneHot(scope, ids, 10);            // [N] -> [N,10]
//   Output t = ops::OneHot(scope, ids, 5, 0, 0.9f, 0.025f); // [5,N], smoothed
//
// Not differentiable (integer input).
#ifndef IPUFLOW_OPS_ARRAY_ONE_HOT_H_
#define IPUFLOW_OPS_ARRAY_ONE_HOT_H_

#include <cstdint>

#include "core/scope.h"

namespace ipuflow::ops {

// REQUIRES (checked): depth >= 0; axis in [-rank-1, rank].
Output OneHot(const Scope& scope, Output indices, int64_t depth,
              int64_t axis = -1, float on_value = 1.0f, float off_value = 0.0f,
              DType dtype = DType::kFloat32);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_ARRAY_ONE_HOT_H_
