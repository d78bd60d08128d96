// Dtype-agnostic copy kernels shared by the array ops (Transpose, Slice,
// StridedSlice, Pad, Concat, Split, Gather): they move elements by size, so
// one instantiation serves float32 and int32, another float16, and so on.
//
//   // y[i, j] = x[j, i] for x:[R, C], as a strided copy:
//   StridedCopy(ctx, {C, R}, y_bytes, {R, 1}, x_bytes, {1, C}, sizeof(float));
//   // Every row r: copy 12 bytes from x + r * 20 to y + r * 12.
//   CopyRowPieces(ctx, rows, {{y_bytes, 12, x_bytes, 20, 12}});
//
// Kernels run on the caller's KernelContext intra-op pool; distinct calls
// may run concurrently as long as their destinations do not overlap.
#ifndef IPUFLOW_OPS_ARRAY_COPY_KERNELS_H_
#define IPUFLOW_OPS_ARRAY_COPY_KERNELS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "core/kernel.h"
#include "core/op_registry.h"

namespace ipuflow::ops {

// Cycles per copied element for ParallelFor's cost model.
inline constexpr double kCopyCost = 1.0;

// Calls fn(U{}) with U an unsigned integer type of `elem_size` bytes.
// REQUIRES: elem_size is 1, 2, 4 or 8 (every data dtype's size).
template <typename Fn>
void WithElementType(size_t elem_size, Fn&& fn) {
  switch (elem_size) {
    case 1:
      return fn(uint8_t{});
    case 2:
      return fn(uint16_t{});
    case 4:
      return fn(uint32_t{});
    default:
      IPU_CHECK(elem_size == 8);
      return fn(uint64_t{});
  }
}

// Strides, in elements, of a contiguous row-major tensor of `shape`.
std::vector<int64_t> RowMajorStrides(const TensorShape& shape);

// For every index i of `dims`:
//   dst[sum(i * dst_strides)] = src[sum(i * src_strides)]
// Strides are in elements and may be negative or zero (src only). Adjacent
// dimensions that are contiguous in both are merged first; rows of the
// innermost dimension are copied in parallel, with memcpy when contiguous.
void StridedCopy(const KernelContext& ctx, absl::Span<const int64_t> dims,
                 void* dst, absl::Span<const int64_t> dst_strides,
                 const void* src, absl::Span<const int64_t> src_strides,
                 size_t elem_size);

// One piece of a row-wise copy: row r copies `bytes` bytes from
// src + r * src_stride to dst + r * dst_stride.
struct RowPiece {
  char* dst;
  int64_t dst_stride;
  const char* src;
  int64_t src_stride;
  int64_t bytes;
};
// Copies every piece for every row in [0, rows), rows in parallel
// (Concat and Split: each row is one slab of the outer dimensions).
void CopyRowPieces(const KernelContext& ctx, int64_t rows,
                   absl::Span<const RowPiece> pieces);

// Sets `t` (allocated, any data dtype) to `value` converted to its dtype,
// in parallel; zero is a memset.
void FillTensor(const KernelContext& ctx, const Tensor& t, double value);

// "[1,-2,3]": how errors print list(int) attributes.
std::string IntListString(absl::Span<const int64_t> values);

// InvalidArgument unless input i holds data (not a resource handle).
absl::Status ExpectDataInput(const ShapeContext& c, int i);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_ARRAY_COPY_KERNELS_H_
