// BatchMatMul: matrix products over the leading (batch) dimensions:
// z[..., :, :] = op(x[..., :, :]) * op(y[..., :, :]), where op transposes the
// last two dims when adj_x / adj_y is set (real dtypes: the adjoint is the
// transpose). Each input has rank >= 2; the batch dimensions broadcast like
// numpy's matmul (a rank-2 input is one matrix used for every batch entry).
// float32 and float16 (computed in float32, the result rounded once);
// partials_type "half" makes the running sums float16, as MatMul's
// (ops/math/partials_type.h). Gradients use the forward op's partials_type.
//
//   Output scores = ops::BatchMatMul(scope, q, k, false, /*adj_y=*/true);
//   // [B,H,T,D] x [B,H,T,D]^T -> [B,H,T,T]
//   Output z = ops::BatchMatMul(scope, x, w);   // [B,M,K] x [K,N] -> [B,M,N]
//   Output h = ops::BatchMatMul(scope, x, w, {.partials_type = "half"});
//
// Mismatched inner dimensions read like MatMul's: "BatchMatMul 'bmm': inner
// dimensions differ: [2,2,3] x [2,4,5]". Threads: the rows of every output
// matrix are shared out on the device's intra-op pool.
#ifndef IPUFLOW_OPS_MATH_BATCH_MAT_MUL_H_
#define IPUFLOW_OPS_MATH_BATCH_MAT_MUL_H_

#include <string>

#include "core/scope.h"

namespace ipuflow::ops {

struct BatchMatMulOptions {
  bool adj_x = false;
  bool adj_y = false;
  std::string partials_type = "float";  // or "half"
};

Output BatchMatMul(const Scope& scope, Output x, Output y,
                   const BatchMatMulOptions& options);
Output BatchMatMul(const Scope& scope, Output x, Output y, bool adj_x = false,
                   bool adj_y = false);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_MATH_BATCH_MAT_MUL_H_
