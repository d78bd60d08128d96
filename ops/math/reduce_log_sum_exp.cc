#include "ops/math/reduce_log_sum_exp.h"

#include <cmath>
#include <limits>
#include <vector>

#include "core/half.h"
#include "core/op_registry.h"
#include "ops/math/broadcast_grad.h"
#include "ops/math/cast.h"
#include "ops/math/exp.h"
#include "ops/math/mul.h"
#include "ops/math/reduce_grad_like.h"
#include "ops/math/reduction.h"
#include "ops/math/scalar_ops.h"
#include "ops/math/sub.h"
#include "ops/math/vector_math.h"

namespace ipuflow::ops {
namespace {

// log(sum(exp(row))) with the row's maximum taken out first.
float LogSumExpRow(const float* row, int64_t r) {
  float m = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < r; ++i) m = NanMax<float>()(m, row[i]);
  if (std::isnan(m) || std::isinf(m)) return m;  // NaN, all -inf, or +inf.
  constexpr int64_t kChunk = 1024;
  float buf[kChunk];
  std::vector<float> partial;
  for (int64_t i = 0; i < r; i += kChunk) {
    const int64_t c = std::min(kChunk, r - i);
    for (int64_t j = 0; j < c; ++j) buf[j] = row[i + j] - m;
    VecExp(buf, buf, c);
    partial.push_back(PairwiseSum(buf, c));
  }
  return m + std::log(PairwiseSum(partial.data(),
                                  static_cast<int64_t>(partial.size())));
}

REGISTER_OP("ReduceLogSumExp")
    .Input("x")
    .Attr("axes", std::vector<int64_t>{})
    .Attr("keep_dims", false)
    .SetShapeFn(FloatReductionShapeFn)
    .SetKernel([](KernelContext& ctx) {
      return RowReductionKernel(ctx, LogSumExpRow);
    })
    // y = log(sum exp(x));  dy/dx = exp(x - y), the row's softmax.
    // float16 in float32, rounded once: exp(x - y) with y rounded to
    // float16 is off by up to |y| 2^-11 (x = [80, 80]: 0.50293, not 0.5),
    // so y is recomputed in float32 from the widened x (TensorFlow IPU
    // guide, "Half-precision floating point": float32 partials).
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      const auto& axes = op.attr<std::vector<int64_t>>("axes");
      const bool half = op.input(0).dtype() == DType::kFloat16;
      const Output x =
          half ? Cast(s, op.input(0), DType::kFloat32) : op.input(0);
      const Output y =
          half ? ReduceLogSumExp(s, x, axes, op.attr<bool>("keep_dims"))
               : OutputOf(op);
      const Output g = half ? Cast(s, dy[0], DType::kFloat32) : dy[0];
      const Output p = Exp(s, Sub(s, x, ReduceGradLike(s, y, x, axes)));
      const Output grad = Mul(s, p, ReduceGradLike(s, g, x, axes));
      dx->push_back(half ? Cast(s, grad, DType::kFloat16) : grad);
      return absl::OkStatus();
    });

}  // namespace

Output ReduceLogSumExp(const Scope& scope, Output x, std::vector<int64_t> axes,
                       bool keep_dims) {
  return scope.AddNode("ReduceLogSumExp", {x},
                       {{"axes", std::move(axes)}, {"keep_dims", keep_dims}});
}

}  // namespace ipuflow::ops
