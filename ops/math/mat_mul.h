// MatMul: the matrix product c = op(a) * op(b) of two rank-2 tensors, where
// op transposes when transpose_a / transpose_b is set. float32 and float16
// (computed in float32, the result rounded once); partials_type "half"
// makes the running sums float16 (ops/math/partials_type.h). Gradients use
// the forward op's partials_type.
//
//   Output logits = ops::MatMul(scope, x, w);          // [N,784] x [784,10]
//   Output gram = ops::MatMul(scope, x, x, /*transpose_a=*/true);  // x^T x
//   Output h = ops::MatMul(scope, x16, w16, {.partials_type = "half"});
//
// Mismatched inner dimensions are an InvalidArgument error such as
// "MatMul 'dense/MatMul': inner dimensions differ: [2,3] x [4,5]" (a
// transposed operand's shape is followed by ^T). Threads: rows of c are
// computed in parallel on the device's intra-op pool.
#ifndef IPUFLOW_OPS_MATH_MAT_MUL_H_
#define IPUFLOW_OPS_MATH_MAT_MUL_H_

#include <string>

#include "core/scope.h"

namespace ipuflow::ops {

struct MatMulOptions {
  bool transpose_a = false;
  bool transpose_b = false;
  std::string partials_type = "float";  // or "half"
};

Output MatMul(const Scope& scope, Output a, Output b,
              const MatMulOptions& options);
Output MatMul(const Scope& scope, Output a, Output b, bool transpose_a = false,
              bool transpose_b = false);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_MATH_MAT_MUL_H_
