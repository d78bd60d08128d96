// Norm: the vector p-norm of x over `axes` (every axis when empty, the
// whole tensor as one vector; `keep_dims` as ReduceSum):
//   (sum |x|^ord)^(1/ord) for ord > 0, max |x| for ord = inf.
// float32 and float16 (computed in float32, rounded once). The sums are
// pairwise and scaled by the row's largest |x|, so neither overflows nor
// underflows where the norm itself is representable.
//
//   Output l2 = ops::Norm(scope, grads, {-1});                   // 2-norm
//   Output l1 = ops::Norm(scope, x, {}, false, /*ord=*/1.0f);
//   Output linf = ops::Norm(scope, x, {1}, true, INFINITY);
//
// tf.norm / torch.linalg.vector_norm for ord > 0 (0 and negative ords are
// an error). NaN anywhere in a row gives NaN; the norm of zero elements is
// 0. Gradient: dy sign(x) (|x| / y)^(ord - 1), 0 where y = 0 (ord 1: dy
// sign(x); ord inf: dy sign(x) at the largest |x|, ties sharing it).
#ifndef IPUFLOW_OPS_MATH_NORM_H_
#define IPUFLOW_OPS_MATH_NORM_H_

#include <cstdint>
#include <vector>

#include "core/scope.h"

namespace ipuflow::ops {

// REQUIRES (checked): ord > 0 (inf allowed).
Output Norm(const Scope& scope, Output x, std::vector<int64_t> axes = {},
            bool keep_dims = false, float ord = 2.0f);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_MATH_NORM_H_
