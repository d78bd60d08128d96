// Sort and TopK: values in order, with the indices they came from (int32).
//
// Sort: x sorted along `axis` (negative from the end), ascending or, with
// `descending`, descending; stable (ties keep their order), NaN sorts above
// every number (last ascending, first descending), as torch.sort(stable=True)
// / tf.sort + tf.argsort. Outputs values (x's shape) and indices.
//
// TopK: the k largest along the last axis, largest first, ties by the lower
// index, NaN above every number, as tf.math.top_k (sorted = true). Outputs
// values and indices, [..., k].
//
//   SortOutputs s = ops::Sort(scope, x, -1, /*descending=*/true);
//   SortOutputs top = ops::TopK(scope, logits, 5);  // top.values, top.indices
//
// Any numeric dtype; an axis longer than 2^31 - 1 is an error (int32
// indices). Gradient (values): dy added back at the indices (ScatterAdd).
// In ops/math because the ordering is arithmetic on values.
#ifndef IPUFLOW_OPS_MATH_SORT_H_
#define IPUFLOW_OPS_MATH_SORT_H_

#include <cstdint>

#include "core/scope.h"

namespace ipuflow::ops {

struct SortOutputs {
  Output values;
  Output indices;
};

SortOutputs Sort(const Scope& scope, Output x, int64_t axis = -1,
                 bool descending = false);
// REQUIRES (checked): 0 <= k <= the last dimension of x.
SortOutputs TopK(const Scope& scope, Output x, int64_t k);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_MATH_SORT_H_
