#include "ops/array/copy_kernels.h"

#include <cstring>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/half.h"

namespace ipuflow::ops {
namespace {

using Dims = absl::InlinedVector<int64_t, 8>;

// A copy geometry with size-1 dimensions dropped and dimensions that are
// contiguous in both layouts merged. Invariant: dims.size() == dst.size() ==
// src.size(); empty means a single element.
struct Geometry {
  Dims dims, dst, src;
};

Geometry Simplify(absl::Span<const int64_t> dims, absl::Span<const int64_t> ds,
                  absl::Span<const int64_t> ss) {
  Geometry g;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == 1) continue;
    if (!g.dims.empty() && g.dst.back() == dims[i] * ds[i] &&
        g.src.back() == dims[i] * ss[i]) {
      g.dims.back() *= dims[i];
      g.dst.back() = ds[i];
      g.src.back() = ss[i];
      continue;
    }
    g.dims.push_back(dims[i]);
    g.dst.push_back(ds[i]);
    g.src.push_back(ss[i]);
  }
  return g;
}

template <typename U>
void StridedCopyT(const KernelContext& ctx, const Geometry& g, U* dst,
                  const U* src) {
  const int rank = static_cast<int>(g.dims.size());
  if (rank == 0) {
    *dst = *src;
    return;
  }
  const int64_t inner = g.dims[rank - 1];
  const int64_t di = g.dst[rank - 1], si = g.src[rank - 1];
  int64_t rows = 1;
  for (int d = 0; d < rank - 1; ++d) rows *= g.dims[d];
  const bool contiguous = di == 1 && si == 1;
  const double cost = inner * (contiguous ? kCopyCost / 4 : kCopyCost) + rank;
  ctx.ParallelFor(rows, cost, [&](int64_t begin, int64_t end) {
    // Odometer over the outer dimensions, started at row `begin`.
    Dims idx(rank - 1, 0);
    int64_t od = 0, os = 0;
    int64_t rem = begin;
    for (int d = rank - 2; d >= 0; --d) {
      idx[d] = rem % g.dims[d];
      rem /= g.dims[d];
      od += idx[d] * g.dst[d];
      os += idx[d] * g.src[d];
    }
    for (int64_t r = begin; r < end; ++r) {
      U* out = dst + od;
      const U* in = src + os;
      if (contiguous) {
        std::memcpy(out, in, inner * sizeof(U));
      } else {
        for (int64_t j = 0; j < inner; ++j) out[j * di] = in[j * si];
      }
      for (int d = rank - 2; d >= 0; --d) {
        od += g.dst[d];
        os += g.src[d];
        if (++idx[d] < g.dims[d]) break;
        od -= g.dims[d] * g.dst[d];
        os -= g.dims[d] * g.src[d];
        idx[d] = 0;
      }
    }
  });
}

}  // namespace

std::vector<int64_t> RowMajorStrides(const TensorShape& shape) {
  std::vector<int64_t> strides(shape.rank(), 1);
  for (int d = shape.rank() - 2; d >= 0; --d) {
    strides[d] = strides[d + 1] * shape.dim(d + 1);
  }
  return strides;
}

void StridedCopy(const KernelContext& ctx, absl::Span<const int64_t> dims,
                 void* dst, absl::Span<const int64_t> dst_strides,
                 const void* src, absl::Span<const int64_t> src_strides,
                 size_t elem_size) {
  for (int64_t d : dims) {
    if (d == 0) return;
  }
  const Geometry g = Simplify(dims, dst_strides, src_strides);
  WithElementType(elem_size, [&](auto tag) {
    using U = decltype(tag);
    StridedCopyT<U>(ctx, g, static_cast<U*>(dst), static_cast<const U*>(src));
  });
}

void CopyRowPieces(const KernelContext& ctx, int64_t rows,
                   absl::Span<const RowPiece> pieces) {
  int64_t row_bytes = 0;
  for (const RowPiece& p : pieces) row_bytes += p.bytes;
  if (rows == 0 || row_bytes == 0) return;
  ctx.ParallelFor(rows, kCopyCost * row_bytes / 16 + pieces.size(),
                  [&](int64_t begin, int64_t end) {
                    for (int64_t r = begin; r < end; ++r) {
                      for (const RowPiece& p : pieces) {
                        if (p.bytes == 0) continue;
                        std::memcpy(p.dst + r * p.dst_stride,
                                    p.src + r * p.src_stride, p.bytes);
                      }
                    }
                  });
}

void FillTensor(const KernelContext& ctx, const Tensor& t, double value) {
  const int64_t n = t.NumElements();
  if (n == 0) return;
  if (value == 0) {
    char* p = static_cast<char*>(t.raw_data());
    const int64_t elem = static_cast<int64_t>(DTypeSize(t.dtype()));
    ctx.ParallelFor(n, kCopyCost / 8, [&](int64_t b, int64_t e) {
      std::memset(p + b * elem, 0, (e - b) * elem);
    });
    return;
  }
  IPUFLOW_SWITCH_ALL(
      t.dtype(),
      ctx.ParallelFor(n, kCopyCost / 4,
                      [&](int64_t b, int64_t e) {
                        Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>(
                            t.data<T>() + b, e - b)
                            .setConstant(static_cast<T>(value));
                      }),
      IPU_CHECK(false));
}

std::string IntListString(absl::Span<const int64_t> values) {
  return absl::StrCat("[", absl::StrJoin(values, ","), "]");
}

absl::Status ExpectDataInput(const ShapeContext& c, int i) {
  if (c.input_dtype(i) == DType::kResource) {
    return absl::InvalidArgumentError(absl::StrCat(
        c.InputName(i), " is a resource handle; read the variable first"));
  }
  return absl::OkStatus();
}

}  // namespace ipuflow::ops
