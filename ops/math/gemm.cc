// GCC 12 warns -Wuninitialized inside its own avx512fintrin.h when Eigen's
// AVX-512 kernels are inlined here (GCC bug 105593, fixed in GCC 13). The
// pragma must come before the headers that pull those intrinsics in.
#pragma GCC diagnostic ignored "-Wuninitialized"

#include "ops/math/gemm.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "core/half.h"
#include "ops/cwise.h"
#include "ops/math/half_io.h"
#include "ops/math/partials_type.h"
#include "ops/onednn/onednn_gemm.h"

namespace ipuflow::ops {
namespace {

using RowMajorMatrix =
    Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMatrixMap = Eigen::Map<const RowMajorMatrix>;
using MatrixMap = Eigen::Map<RowMajorMatrix>;

// GemmRows with float16 partials (partials_type.h): the same four cases.
void HalfPartialsRows(const ConstMatrixMap& am, const ConstMatrixMap& bm,
                      const GemmShape& s, int64_t r0, int64_t rows,
                      MatrixMap& out) {
  if (!s.transpose_a) {
    if (!s.transpose_b) {
      HalfPartialsProduct(am.middleRows(r0, rows), bm, out);
    } else {
      HalfPartialsProduct(am.middleRows(r0, rows), bm.transpose(), out);
    }
  } else {
    if (!s.transpose_b) {
      HalfPartialsProduct(am.middleCols(r0, rows).transpose(), bm, out);
    } else {
      HalfPartialsProduct(am.middleCols(r0, rows).transpose(), bm.transpose(),
                          out);
    }
  }
}

// Float partials go through oneDNN's sgemm (ops/onednn/onednn_gemm.h):
// its JIT kernels use AVX-512 where the CPU has it, which this build's
// x86-64-v3 Eigen cannot, and measured no slower with AVX2 only
// (//ops/math:mat_mul_benchmark, BM_EigenMatMul vs BM_OnednnMatMul). Eigen
// stays below as the reference and for float16 partials.
constexpr bool kUseOnednn = true;

// Rows [r0, r1) of c = op(a) * op(b), for one triple of matrices.
void GemmRows(const float* a, const float* b, float* c, const GemmShape& s,
              int64_t r0, int64_t r1) {
  const int64_t rows = r1 - r0;
  MatrixMap out(c + r0 * s.n, rows, s.n);
  if (s.k == 0) {
    out.setZero();
    return;
  }
  const ConstMatrixMap am(a, s.transpose_a ? s.k : s.m,
                          s.transpose_a ? s.m : s.k);
  const ConstMatrixMap bm(b, s.transpose_b ? s.n : s.k,
                          s.transpose_b ? s.k : s.n);
  if (s.half_partials) {
    HalfPartialsRows(am, bm, s, r0, rows, out);
    return;
  }
  if (kUseOnednn) {
    onednn::SgemmRows(a, b, c, {s.m, s.k, s.n, s.transpose_a, s.transpose_b},
                      r0, r1);
    return;
  }
  if (!s.transpose_a) {
    if (!s.transpose_b) {
      out.noalias() = am.middleRows(r0, rows) * bm;
    } else {
      out.noalias() = am.middleRows(r0, rows) * bm.transpose();
    }
  } else {
    if (!s.transpose_b) {
      out.noalias() = am.middleCols(r0, rows).transpose() * bm;
    } else {
      out.noalias() = am.middleCols(r0, rows).transpose() * bm.transpose();
    }
  }
}

void GemmFloat(const KernelContext& ctx, const float* a, const float* b,
               float* c, const GemmShape& s, absl::Span<const int64_t> a_index,
               absl::Span<const int64_t> b_index) {
  const int64_t batch = static_cast<int64_t>(a_index.size());
  const int64_t a_size = s.m * s.k, b_size = s.k * s.n, c_size = s.m * s.n;
  if (batch * c_size == 0) return;
  // A unit is one output row: 2*k*n flops.
  ctx.ParallelFor(
      batch * s.m, 2.0 * s.k * s.n, [&](int64_t begin, int64_t end) {
        while (begin < end) {  // The shard may span several matrices.
          const int64_t i = begin / s.m, r0 = begin % s.m;
          const int64_t r1 = std::min(s.m, r0 + (end - begin));
          GemmRows(a + a_index[i] * a_size, b + b_index[i] * b_size,
                   c + i * c_size, s, r0, r1);
          begin += r1 - r0;
        }
      });
}

}  // namespace

absl::Status BatchedGemm(const KernelContext& ctx, const Tensor& a,
                         const Tensor& b, const GemmShape& shape,
                         absl::Span<const int64_t> a_index,
                         absl::Span<const int64_t> b_index, Tensor* c) {
  switch (a.dtype()) {
    case DType::kFloat32:
      GemmFloat(ctx, a.data<float>(), b.data<float>(), c->data<float>(), shape,
                a_index, b_index);
      return absl::OkStatus();
    case DType::kFloat16: {
      // Eigen has no fast float16 GEMM on the CPU, nor has the IPU's AMP
      // unit float16 accumulators by default: widen each input once
      // (O(size) against the product's O(m*k*n)), multiply in float32 and
      // round the result once.
      // The float32 copies live in per-thread scratch (half_io.h).
      const Tensor af = AsFloat32(ctx, a, /*slot=*/0);
      const Tensor bf = AsFloat32(ctx, b, /*slot=*/1);
      const Tensor cf = ThreadScratch(/*slot=*/2, c->shape());
      GemmFloat(ctx, af.data<float>(), bf.data<float>(), cf.data<float>(),
                shape, a_index, b_index);
      StoreOutput(ctx, /*output=*/0, cf, c);
      return absl::OkStatus();
    }
    default:
      return UnsupportedDType(ctx, a.dtype());
  }
}

std::string InnerDimsDiffer(const TensorShape& a, bool transpose_a,
                            const TensorShape& b, bool transpose_b) {
  return absl::StrCat("inner dimensions differ: ", a.DebugString(),
                      transpose_a ? "^T" : "", " x ", b.DebugString(),
                      transpose_b ? "^T" : "");
}

}  // namespace ipuflow::ops
