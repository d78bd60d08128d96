// SerializedMatMul: a @ b as `serialization_factor` smaller products, as
// Graphcore's serialized_matmul (TensorFlow IPU math_ops.py), to cut the
// temporary memory of one large product. With op(a) [..., m, k] and op(b)
// [..., k, n] (op transposes the last two axes when asked; batch
// dimensions equal):
//   "a_columns"         split m, pieces concatenated on axis -2
//   "a_rows_b_columns"  split k, pieces summed (in piece order)
//   "b_rows"            split n, pieces concatenated on axis -1
// The factor must divide the split dimension. The gradient is serialised
// the same way: it is two SerializedMatMuls (dA = dC op(b)^T, dB =
// op(a)^T dC, transposed back where a or b was), each split along the
// dimension that the forward's split becomes in it. float32 and float16
// (computed in float32, rounded once).
//
//   Output logits = ops::SerializedMatMul(scope, hidden, embeddings_t,
//                                         {.factor = 4,
//                                          .dimension = "b_rows"});
#ifndef IPUFLOW_OPS_MATH_SERIALIZED_MAT_MUL_H_
#define IPUFLOW_OPS_MATH_SERIALIZED_MAT_MUL_H_

#include <cstdint>
#include <string>

#include "core/scope.h"

namespace ipuflow::ops {

struct SerializedMatMulOptions {
  int64_t factor = 1;
  std::string dimension = "a_columns";  // Or "a_rows_b_columns", "b_rows".
  bool transpose_a = false;
  bool transpose_b = false;
};

Output SerializedMatMul(const Scope& scope, Output a, Output b,
                        const SerializedMatMulOptions& options);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_MATH_SERIALIZED_MAT_MUL_H_
