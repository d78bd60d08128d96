// Machinery shared by ReduceSum, ReduceMean, ReduceMax and ReduceGradLike:
// the `axes` / `keep_dims` attributes, the shape function, and the kernel.
//
//   REGISTER_OP("ReduceSum")
//       .Input("x")
//       .Attr("axes", std::vector<int64_t>{})
//       .Attr("keep_dims", false)
//       .SetShapeFn(ReductionShapeFn)
//       .SetKernel([](KernelContext& ctx) {
//         return ReductionKernel(ctx, Reduction::kSum);
//       });
//
// The kernel drops size-1 dimensions and merges neighbouring dimensions that
// are both reduced or both kept; then, for each group of reduced dimensions
// from the innermost, it views the data as [outer, reduced, inner] and
// reduces the middle: contiguous Eigen row reductions when inner == 1,
// accumulation of contiguous inner blocks otherwise, in parallel over outer
// (and over blocks of inner); both pairwise over leaves (256 values, 16
// slices), so float32 sums of millions of values stay within 10x of a
// float64 sum rounded once. float16 accumulates in float32.
//
// Stateless; safe from any thread.
#ifndef IPUFLOW_OPS_MATH_REDUCTION_H_
#define IPUFLOW_OPS_MATH_REDUCTION_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/kernel.h"
#include "core/op_registry.h"

namespace ipuflow::ops {

enum class Reduction { kSum, kMean, kMax };

// The axes an `axes` attribute names for a tensor of `rank`: sorted and
// non-negative; every axis when `axes` is empty. InvalidArgument naming the
// axis and the rank when one is out of range or repeated.
absl::StatusOr<std::vector<int>> NormalizeReductionAxes(
    absl::Span<const int64_t> axes, int rank);

// `shape` reduced over (normalized) `axes`: those dims become 1 when
// `keep_dims`, else are removed. Unknown dims stay unknown.
TensorShape ReducedShape(const TensorShape& shape, absl::Span<const int> axes,
                         bool keep_dims);

// A shape with its size-1 dims dropped and neighbouring dims of the same kind
// (reduced or kept) merged. Same element order as the original shape.
struct CoalescedShape {
  std::vector<int64_t> dims;
  std::vector<bool> reduced;
};
CoalescedShape Coalesce(const TensorShape& shape, absl::Span<const int> axes);

// Shape function of the Reduce* ops: input 0 (numeric) reduced by the
// `axes` and `keep_dims` attributes.
absl::Status ReductionShapeFn(ShapeContext& c);

// Kernel of the Reduce* ops. Mean over zero elements is NaN for floats and an
// error for integers; Max over zero elements is an error (no identity).
absl::Status ReductionKernel(KernelContext& ctx, Reduction kind);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_MATH_REDUCTION_H_
