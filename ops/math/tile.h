// Tile: x repeated multiples[d] times along each dimension d, as tf.tile /
// torch.Tensor.repeat: y[i_0, ..., i_n] = x[i_0 % d_0, ..., i_n % d_n].
//
//   Output t = ops::Tile(scope, x, {2, 3});   // [2,5] -> [4,15]
//
// Any dtype; multiples are >= 0 (0 gives an empty dimension), one per
// dimension of x, and the result's size is checked. The gradient sums dy's
// copies (a Reshape to [m_0, d_0, m_1, d_1, ...] and a ReduceSum over the
// m axes); it needs x's shape known when the gradient is built. In
// ops/math because its gradient is a sum.
#ifndef IPUFLOW_OPS_MATH_TILE_H_
#define IPUFLOW_OPS_MATH_TILE_H_

#include <cstdint>
#include <vector>

#include "core/scope.h"

namespace ipuflow::ops {

Output Tile(const Scope& scope, Output x,
            const std::vector<int64_t>& multiples);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_MATH_TILE_H_
