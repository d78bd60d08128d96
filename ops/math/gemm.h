// Batched matrix product for MatMul and BatchMatMul (no op of its own):
// row-major matrices stored back to back, multiplied with Eigen's GEMM and
// parallelised over blocks of output rows across the whole batch.
//
//   GemmShape s{/*m=*/64, /*k=*/80, /*n=*/48, /*transpose_a=*/false, true};
//   ASSIGN_OR_RETURN(Tensor* c, ctx.allocate_output(0, {64, 48}));
//   RETURN_IF_ERROR(BatchedGemm(ctx, a, b, s, {0}, {0}, c));
//
// Stateless; safe from any thread.
#ifndef IPUFLOW_OPS_MATH_GEMM_H_
#define IPUFLOW_OPS_MATH_GEMM_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "core/kernel.h"

namespace ipuflow::ops {

// c is [m,n]; op(a) is [m,k]; op(b) is [k,n]; op transposes when its flag is
// set (a is then stored [k,m], b [n,k]).
// half_partials: the running sums along k are float16 (partials_type.h).
struct GemmShape {
  int64_t m = 0, k = 0, n = 0;
  bool transpose_a = false, transpose_b = false;
  bool half_partials = false;
};

// For each i: matrix i of c = op(matrix a_index[i] of a) * op(matrix
// b_index[i] of b). float32, or float16 computed in float32 and rounded
// through RoundToHalf. REQUIRES: a, b and c share a dtype; c is output 0 of
// ctx's node and holds a_index.size() [m,n] matrices; a_index.size() ==
// b_index.size(); indices are in range.
absl::Status BatchedGemm(const KernelContext& ctx, const Tensor& a,
                         const Tensor& b, const GemmShape& shape,
                         absl::Span<const int64_t> a_index,
                         absl::Span<const int64_t> b_index, Tensor* c);

// "inner dimensions differ: [2,3] x [4,5]", with "^T" after a transposed
// operand's shape.
std::string InnerDimsDiffer(const TensorShape& a, bool transpose_a,
                            const TensorShape& b, bool transpose_b);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_MATH_GEMM_H_
