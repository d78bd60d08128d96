// ReduceGradLike: the gradient of a reduction, as one op. `dy` has the shape
// of x reduced over `axes` (with or without the reduced dims kept); the
// result has x's shape: dy broadcast back along the reduced axes, divided by
// the number of reduced elements when `mean`. `axes` means what it means for
// ReduceSum (empty: every axis; negative: from the end). Works when x's
// shape is known only at run time (an unknown batch dimension), where a
// static Reshape could not. float32/float16.
//
//   // y = ReduceMean(x, {0}) with x:[?,10]  =>  dx:[?,10] = dy[j] / N
//   Output dx = ops::ReduceGradLike(scope, dy, x, {0}, /*mean=*/true);
#ifndef IPUFLOW_OPS_MATH_REDUCE_GRAD_LIKE_H_
#define IPUFLOW_OPS_MATH_REDUCE_GRAD_LIKE_H_

#include <cstdint>
#include <vector>

#include "core/scope.h"

namespace ipuflow::ops {

Output ReduceGradLike(const Scope& scope, Output dy, Output x,
                      std::vector<int64_t> axes, bool mean = false);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_MATH_REDUCE_GRAD_LIKE_H_
