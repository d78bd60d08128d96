// MatMul: the matrix product c = op(a) * op(b) of two rank-2 tensors, where
// op transposes when transpose_a / transpose_b is set. float32 and float16
// (computed in float32).
//
//   Output logits = ops::MatMul(scope, x, w);          // [N,784] x [784,10]
//   Output gram = ops::MatMul(scope, x, x, /*transpose_a=*/true);  // x^T x
//
// Mismatched inner dimensions are an InvalidArgument error such as
// "MatMul 'dense/MatMul': inner dimensions differ: [2,3] x [4,5]" (a
// transposed operand's shape is followed by ^T). Threads: rows of c are
// computed in parallel on the device's intra-op pool.
#ifndef IPUFLOW_OPS_MATH_MAT_MUL_H_
#define IPUFLOW_OPS_MATH_MAT_MUL_H_

#include "core/scope.h"

namespace ipuflow::ops {

Output MatMul(const Scope& scope, Output a, Output b, bool transpose_a = false,
              bool transpose_b = false);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_MATH_MAT_MUL_H_
