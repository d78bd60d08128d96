#include "ops/onednn/onednn_gemm.h"

#include <algorithm>

#include "core/status.h"
#include "ops/onednn/onednn.h"

namespace ipuflow::ops::onednn {

void SgemmRows(const float* a, const float* b, float* c, const GemmDims& s,
               int64_t r0, int64_t r1) {
  const int64_t rows = r1 - r0;
  if (rows <= 0 || s.n == 0) return;
  float* out = c + r0 * s.n;
  if (s.k == 0) {
    std::fill(out, out + rows * s.n, 0.0f);
    return;
  }
  UseOneThread();
  // Rows [r0, r1) of op(a): rows of a, or columns of a stored [k, m].
  const float* a_rows = s.transpose_a ? a + r0 : a + r0 * s.k;
  const dnnl_status_t status =
      dnnl_sgemm(s.transpose_a ? 'T' : 'N', s.transpose_b ? 'T' : 'N', rows,
                 s.n, s.k, 1.0f, a_rows, s.transpose_a ? s.m : s.k, b,
                 s.transpose_b ? s.k : s.n, 0.0f, out, s.n);
  IPU_CHECK(status == dnnl_success);
}

void BatchedSgemm(const ThreadPool& pool, const float* a, const float* b,
                  float* c, const GemmDims& s,
                  absl::Span<const int64_t> a_index,
                  absl::Span<const int64_t> b_index) {
  const int64_t batch = static_cast<int64_t>(a_index.size());
  const int64_t a_size = s.m * s.k, b_size = s.k * s.n, c_size = s.m * s.n;
  if (batch * c_size == 0) return;
  // A unit is one output row: 2*k*n flops.
  pool.ParallelFor(
      batch * s.m, 2.0 * s.k * s.n, [&](int64_t begin, int64_t end) {
        while (begin < end) {  // The shard may span several matrices.
          const int64_t i = begin / s.m, r0 = begin % s.m;
          const int64_t r1 = std::min(s.m, r0 + (end - begin));
          SgemmRows(a + a_index[i] * a_size, b + b_index[i] * b_size,
                    c + i * c_size, s, r0, r1);
          begin += r1 - r0;
        }
      });
}

}  // namespace ipuflow::ops::onednn
