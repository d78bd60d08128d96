#include "ops/math/reduce_log_sum_exp.h"

#include <cmath>
#include <limits>
#include <vector>

#include "core/op_registry.h"
#include "ops/math/broadcast_grad.h"
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
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      const Output x = op.input(0);
      const auto& axes = op.attr<std::vector<int64_t>>("axes");
      const Output p =
          Exp(s, Sub(s, x, ReduceGradLike(s, OutputOf(op), x, axes)));
      dx->push_back(Mul(s, p, ReduceGradLike(s, dy[0], x, axes)));
      return absl::OkStatus();
    });

}  // namespace

Output ReduceLogSumExp(const Scope& scope, Output x, std::vector<int64_t> axes,
                       bool keep_dims) {
  return scope.AddNode("ReduceLogSumExp", {x},
                       {{"axes", std::move(axes)}, {"keep_dims", keep_dims}});
}

}  // namespace ipuflow::ops
