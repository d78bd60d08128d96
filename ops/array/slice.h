// Slice: the box of x that starts at `begin` and spans `size` elements in
// each dimension (a size of -1 means "to the end of that dimension").
//
//   Output crop = ops::Slice(scope, images, {0, 2, 2, 0}, {-1, 24, 24, -1});
//   Output row1 = ops::Slice(scope, m, {1, 0}, {1, -1});   // [R,C] -> [1,C]
//   // The gradient pads dy with zeros back to x's shape.
#ifndef IPUFLOW_OPS_ARRAY_SLICE_H_
#define IPUFLOW_OPS_ARRAY_SLICE_H_

#include <vector>

#include "core/scope.h"

namespace ipuflow::ops {

// REQUIRES (checked): one begin and one size per dimension of x.
Output Slice(const Scope& scope, Output x, const std::vector<int64_t>& begin,
             const std::vector<int64_t>& size);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_ARRAY_SLICE_H_
