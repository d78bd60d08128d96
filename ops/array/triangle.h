// Tril and Triu: the lower / upper triangle of each matrix in the last two
// dimensions of x (rank >= 2), the rest zero, as torch.tril / torch.triu
// (tf.linalg.band_part with one side unbounded):
//   Tril keeps x[..., i, j] where j - i <= diagonal,
//   Triu keeps x[..., i, j] where j - i >= diagonal.
// `diagonal` 0 is the main diagonal, > 0 above it, < 0 below. Any dtype.
//
//   Output causal = ops::Tril(scope, ones);           // [T,T] lower
//   Output strict = ops::Triu(scope, scores, 1);      // above the diagonal
//
// Linear: the gradient is the same op on dy. Both ops register through one
// helper in triangle.cc.
#ifndef IPUFLOW_OPS_ARRAY_TRIANGLE_H_
#define IPUFLOW_OPS_ARRAY_TRIANGLE_H_

#include <cstdint>

#include "core/scope.h"

namespace ipuflow::ops {

Output Tril(const Scope& scope, Output x, int64_t diagonal = 0);
Output Triu(const Scope& scope, Output x, int64_t diagonal = 0);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_ARRAY_TRIANGLE_H_
