// Gather: slices of `params` picked by `indices` (int32 or int64) along
// `axis`, y.shape = params.shape[:axis] + indices.shape +
// params.shape[axis+1:]. An index outside [0, params.shape[axis]) is an
// error at run time.
//
//   Output emb = ops::Gather(scope, table, ids);  // [V,D], [B,T] -> [B,T,D]
//   Output idx = ops::Const<int32_t>(scope, {2, 0}, {2});
//   Output cols = ops::Gather(scope, x, idx, /*axis=*/1);  // x[:, [2, 0]]
//   // d params: dy summed into zeros at the gathered slices (GatherGrad).
#ifndef IPUFLOW_OPS_ARRAY_GATHER_H_
#define IPUFLOW_OPS_ARRAY_GATHER_H_

#include "core/scope.h"

namespace ipuflow::ops {

Output Gather(const Scope& scope, Output params, Output indices,
              int64_t axis = 0);

// The gradient of Gather for params: zeros shaped like `like` (params),
// with each slice of dy added at the index it was gathered from (repeated
// indices accumulate).
Output GatherGrad(const Scope& scope, Output dy, Output indices, Output like,
                  int64_t axis = 0);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_ARRAY_GATHER_H_
