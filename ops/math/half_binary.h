// Element-wise binary ops on float16 tensors computed in float32: each
// chunk of output elements is evaluated on widened inputs (numpy
// broadcasting, as ops/cwise.h's BinaryKernel) and rounded once through
// RoundToHalf, so the device's rounding mode (stochastic rounding) applies
// to Add, Sub and Mul as to every float16 result.
//
//   if (ctx.input(0).dtype() == DType::kFloat16) {
//     return HalfBinaryKernel(ctx, AddFn());  // f(ArrayXf, ArrayXf)
//   }
//
// Stateless; chunks run in parallel on the intra-op pool.
#ifndef IPUFLOW_OPS_MATH_HALF_BINARY_H_
#define IPUFLOW_OPS_MATH_HALF_BINARY_H_

#include <algorithm>
#include <vector>

#include "core/half.h"
#include "core/half_rounding.h"
#include "ops/cwise.h"
#include "ops/math/half_io.h"

namespace ipuflow::ops {

// z = f(x, y) for float16 x, y (inputs 0 and 1) with broadcasting; f maps
// two float arrays of one length to an array expression.
template <typename F>
absl::Status HalfBinaryKernel(KernelContext& ctx, F f) {
  const Tensor& x = ctx.input(0);
  const Tensor& y = ctx.input(1);
  absl::StatusOr<TensorShape> shape = BroadcastShapes(x.shape(), y.shape());
  if (!shape.ok()) return ctx.InvalidArgument(shape.status().message());
  ASSIGN_OR_RETURN(Tensor * z, ctx.allocate_output(0, *shape));
  const int64_t n = z->NumElements();
  if (n == 0) return absl::OkStatus();
  const TensorShape& out = *shape;
  const int rank = out.rank();
  const int64_t inner = rank == 0 ? 1 : out.dim(rank - 1);
  const std::vector<int64_t> sx = BroadcastStrides(x.shape(), out);
  const std::vector<int64_t> sy = BroadcastStrides(y.shape(), out);
  const half* px = x.data<half>();
  const half* py = y.data<half>();
  half* pz = z->data<half>();
  // Rows of the innermost output dimension, widened one row at a time.
  ctx.ParallelFor(n / inner, kCwiseCost * inner, [&](int64_t b, int64_t e) {
    ArrayX<float> a(inner), c(inner), r(inner);
    for (int64_t row = b; row < e; ++row) {
      const auto [ox, oy] = BroadcastRowOffsets(row, out, sx, sy);
      const bool x_full = rank > 0 && sx[rank - 1] != 0;
      const bool y_full = rank > 0 && sy[rank - 1] != 0;
      if (x_full) {
        WidenFast(px + ox, a.data(), inner);
      } else {
        a.setConstant(static_cast<float>(px[ox]));
      }
      if (y_full) {
        WidenFast(py + oy, c.data(), inner);
      } else {
        c.setConstant(static_cast<float>(py[oy]));
      }
      r = f(a, c);
      RoundToHalf(ctx, 0, r.data(), pz + row * inner, inner, row * inner);
    }
  });
  return absl::OkStatus();
}

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_MATH_HALF_BINARY_H_
