// Machinery shared by the Reduce* ops (ReduceSum, ReduceMean, ReduceMax,
// ReduceMin, ReduceProd; ReduceLogSumExp, ReduceVariance, ReduceStd, Norm,
// ReduceAny, ReduceAll) and ReduceGradLike: the `axes` / `keep_dims`
// attributes, the shape function, the kernels and the one pairwise sum.
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
// Reductions that are not one associative operation (log-sum-exp, variance,
// norms) use RowReductionKernel: the reduced axes are moved innermost (one
// strided copy) and a row function computes each output from its row in
// float32, with PairwiseSum for the sums.
//
// Stateless; safe from any thread.
#ifndef IPUFLOW_OPS_MATH_REDUCTION_H_
#define IPUFLOW_OPS_MATH_REDUCTION_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/kernel.h"
#include "core/op_registry.h"

namespace ipuflow::ops {

enum class Reduction { kSum, kMean, kMax, kMin, kProd };

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
// The same for float32 / float16 inputs only (ReduceProd, ReduceLogSumExp,
// ReduceVariance, ReduceStd, Norm), and for bool inputs only (ReduceAny,
// ReduceAll).
absl::Status FloatReductionShapeFn(ShapeContext& c);
absl::Status BoolReductionShapeFn(ShapeContext& c);

// Kernel of the Reduce* ops. Mean over zero elements is NaN for floats and an
// error for integers; Max and Min over zero elements are an error (no
// identity); Prod over zero elements is 1.
absl::Status ReductionKernel(KernelContext& ctx, Reduction kind);

// The float32 sum of x[0, n), pairwise over leaves of 256 values (the sum
// ReduceSum uses): within 10x of a float64 sum rounded once for millions of
// values. 0 for n == 0.
float PairwiseSum(const float* x, int64_t n);

// `x` with its (normalized) reduced `axes` moved innermost, as a [n, r]
// tensor of x's dtype: row o holds, in row-major order, the r elements that
// reduce into output o. One strided copy.
Tensor ReducedAxesLast(const KernelContext& ctx, const Tensor& x,
                       absl::Span<const int> axes);

// Computes one output from its row of r float32 values (r may be 0).
using RowReduceFn = std::function<float(const float* row, int64_t r)>;

// Kernel of a float reduction defined per row: input 0 (float32 or float16)
// reduced over the `axes` / `keep_dims` attributes, each output computed by
// `fn` in float32 and rounded once to x's dtype.
absl::Status RowReductionKernel(KernelContext& ctx, const RowReduceFn& fn);

// Kernel of ReduceAny (all = false: any element true; false over zero
// elements) and ReduceAll (all = true: every element true; true over zero
// elements) on a bool input 0.
absl::Status BoolReductionKernel(KernelContext& ctx, bool all);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_MATH_REDUCTION_H_
