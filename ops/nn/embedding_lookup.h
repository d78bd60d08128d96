// EmbeddingLookup: rows of a table by integer id, as Graphcore's
// embedding_lookup (TensorFlow IPU embedding_ops.py): params [V, ...]
// (float32 or float16), ids int32 / int64 of any shape; the output is
// ids.shape + params.shape[1:]. With serialization_factor k > 1 (k divides
// V) the table is looked up in k slices of V / k rows, one after another,
// each producing the rows of the ids that fall in it (zeros elsewhere),
// and the partial results are added (exact: each id is in one slice), as
// Graphcore's serialised lookup does to cut the temporary memory of one
// large multiSlice. Ids outside [0, V) are an error (Graphcore: undefined).
// The gradient (EmbeddingLookupGrad) scatter-adds dy into zeros shaped like
// params (multiUpdateAdd), slice by slice the same way, repeated ids
// accumulating in float32.
//
//   Output tokens = ops::EmbeddingLookup(scope, table, ids,
//                                        /*serialization_factor=*/4);
#ifndef IPUFLOW_OPS_NN_EMBEDDING_LOOKUP_H_
#define IPUFLOW_OPS_NN_EMBEDDING_LOOKUP_H_

#include <cstdint>

#include "core/scope.h"

namespace ipuflow::ops {

Output EmbeddingLookup(const Scope& scope, Output params, Output ids,
                       int64_t serialization_factor = 1);

// dparams = zeros like params with dy's rows added at their ids.
Output EmbeddingLookupGrad(const Scope& scope, Output dy, Output ids,
                           Output params, int64_t serialization_factor = 1);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_NN_EMBEDDING_LOOKUP_H_
