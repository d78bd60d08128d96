// Batched float32 GEMM through oneDNN's sgemm (its JIT kernels, AVX-512
// where the CPU has it), the rows of the output shared over an ipuflow
// intra-op pool, each share one single-threaded oneDNN call (onednn.h).
//
//   onednn::GemmDims s{/*m=*/64, /*k=*/80, /*n=*/48, false, true};
//   onednn::BatchedSgemm(ctx.intra_op(), a, b, c, s, {0}, {0});
//
// Layout as ops/math/gemm.h: row-major matrices stored back to back.
// Thread safety: stateless; safe from any thread.
#ifndef IPUFLOW_OPS_ONEDNN_ONEDNN_GEMM_H_
#define IPUFLOW_OPS_ONEDNN_ONEDNN_GEMM_H_

#include <cstdint>

#include "absl/types/span.h"
#include "core/thread_pool.h"

namespace ipuflow::ops::onednn {

// c is [m,n]; op(a) is [m,k]; op(b) is [k,n]; a transposed operand is
// stored transposed (a as [k,m], b as [n,k]).
struct GemmDims {
  int64_t m = 0, k = 0, n = 0;
  bool transpose_a = false, transpose_b = false;
};

// Rows [r0, r1) of c = op(a) * op(b), on the calling thread.
// REQUIRES: 0 <= r0 <= r1 <= s.m.
void SgemmRows(const float* a, const float* b, float* c, const GemmDims& s,
               int64_t r0, int64_t r1);

// For each i: matrix i of c = op(matrix a_index[i] of a) * op(matrix
// b_index[i] of b), rows split over `pool` (and the caller) as
// ThreadPool::ParallelFor decides from the flops.
// REQUIRES: c holds a_index.size() [m,n] matrices; a_index.size() ==
// b_index.size(); indices are in range.
void BatchedSgemm(const ThreadPool& pool, const float* a, const float* b,
                  float* c, const GemmDims& s,
                  absl::Span<const int64_t> a_index,
                  absl::Span<const int64_t> b_index);

}  // namespace ipuflow::ops::onednn

#endif  // IPUFLOW_OPS_ONEDNN_ONEDNN_GEMM_H_
