// StridedSlice: numpy basic indexing, x[b0:e0:s0, b1:e1:s1, ...], with
// TensorFlow's semantics for negative indices (counted from the end),
// out-of-range bounds (clamped), negative strides, and three bitmasks, bit i
// applying to dimension i:
//   begin_mask        ignore begin[i]: start at the first element (the last
//                     one for a negative stride);
//   end_mask          ignore end[i]: run to the end (the start for a negative
//                     stride);
//   shrink_axis_mask  take the single index begin[i] and drop the dimension.
// Dimensions past the end of `begin` are taken whole.
//
//   // y = x[1:, ::-1, 2] for a rank-3 x:
//   StridedSliceOptions o;
//   o.begin_mask = 0b010;  o.end_mask = 0b011;  o.shrink_axis_mask = 0b100;
//   Output y =
//       ops::StridedSlice(scope, x, {1, 0, 2}, {0, 0, 3}, {1, -1, 1}, o);
#ifndef IPUFLOW_OPS_ARRAY_STRIDED_SLICE_H_
#define IPUFLOW_OPS_ARRAY_STRIDED_SLICE_H_

#include <vector>

#include "core/scope.h"

namespace ipuflow::ops {

struct StridedSliceOptions {
  int64_t begin_mask = 0;
  int64_t end_mask = 0;
  int64_t shrink_axis_mask = 0;
};

// REQUIRES (checked): begin, end and strides of equal length <= rank(x);
// strides non-zero.
Output StridedSlice(const Scope& scope, Output x,
                    const std::vector<int64_t>& begin,
                    const std::vector<int64_t>& end,
                    const std::vector<int64_t>& strides,
                    StridedSliceOptions options = {});

// The gradient of StridedSlice: zeros shaped like `like` (x) with dy
// written at the positions the slice read.
Output StridedSliceGrad(const Scope& scope, Output dy, Output like,
                        const std::vector<int64_t>& begin,
                        const std::vector<int64_t>& end,
                        const std::vector<int64_t>& strides,
                        StridedSliceOptions options = {});

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_ARRAY_STRIDED_SLICE_H_
