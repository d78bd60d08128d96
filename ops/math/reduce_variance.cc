#include "ops/math/reduce_variance.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/op_registry.h"
#include "ops/array/const.h"
#include "ops/array/fill.h"
#include "ops/math/broadcast_grad.h"
#include "ops/math/div.h"
#include "ops/math/mul.h"
#include "ops/math/reduce_grad_like.h"
#include "ops/math/reduce_mean.h"
#include "ops/math/reduce_sum.h"
#include "ops/math/reduction.h"
#include "ops/math/sub.h"

namespace ipuflow::ops {
namespace {

// sum((row - mean)^2) / max(0, r - correction), two passes.
float VarianceRow(const float* row, int64_t r, int64_t correction) {
  const float mean = PairwiseSum(row, r) / static_cast<float>(r);
  constexpr int64_t kChunk = 1024;
  float buf[kChunk];
  std::vector<float> partial;
  for (int64_t i = 0; i < r; i += kChunk) {
    const int64_t c = std::min(kChunk, r - i);
    for (int64_t j = 0; j < c; ++j) {
      const float d = row[i + j] - mean;
      buf[j] = d * d;
    }
    partial.push_back(PairwiseSum(buf, c));
  }
  const float ss =
      PairwiseSum(partial.data(), static_cast<int64_t>(partial.size()));
  return ss / static_cast<float>(std::max<int64_t>(0, r - correction));
}

absl::Status VarianceShapeFn(ShapeContext& c) {
  ASSIGN_OR_RETURN(int64_t correction, c.attr<int64_t>("correction"));
  if (correction < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("correction is ", correction, "; expected >= 0"));
  }
  return FloatReductionShapeFn(c);
}

absl::Status VarianceKernel(KernelContext& ctx, bool std_dev) {
  const int64_t correction = ctx.attr<int64_t>("correction");
  return RowReductionKernel(ctx, [=](const float* row, int64_t r) {
    const float v = VarianceRow(row, r, correction);
    return std_dev ? std::sqrt(v) : v;
  });
}

// dvar/dx = 2 (x - mean) / (n - correction), as a tensor of x's shape
// (before dy). n is a constant when x's shape is known, else counted.
Output VarianceDx(const Scope& s, const Node& op, Output scale_by) {
  const Output x = op.input(0);
  const auto& axes = op.attr<std::vector<int64_t>>("axes");
  const int64_t correction = op.attr<int64_t>("correction");
  const Output centred = Sub(s, x, ReduceMean(s, x, axes, true));
  Output divisor;
  const TensorShape& xs = x.shape();
  const TensorShape& ys = OutputOf(op).shape();
  if (xs.IsFullyDefined() && ys.IsFullyDefined()) {
    const int64_t n =
        ys.num_elements() == 0 ? 0 : xs.num_elements() / ys.num_elements();
    divisor =
        Const(s, static_cast<double>(std::max<int64_t>(0, n - correction)),
              x.dtype());
  } else {
    divisor = Sub(s, ReduceSum(s, OnesLike(s, x), axes, true),
                  Const(s, static_cast<double>(correction), x.dtype()));
  }
  return Div(s, Mul(s, centred, scale_by), divisor);
}

REGISTER_OP("ReduceVariance")
    .Input("x")
    .Attr("axes", std::vector<int64_t>{})
    .Attr("keep_dims", false)
    .Attr("correction", int64_t{0})
    .SetShapeFn(VarianceShapeFn)
    .SetKernel([](KernelContext& ctx) { return VarianceKernel(ctx, false); })
    // var = sum((x - mean)^2) / (n - c);  dvar/dx = 2 (x - mean) / (n - c)
    // (the mean's own derivative sums to 0 against x - mean).
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      const auto& axes = op.attr<std::vector<int64_t>>("axes");
      const Output x = op.input(0);
      dx->push_back(Mul(s, VarianceDx(s, op, Const(s, 2.0, x.dtype())),
                        ReduceGradLike(s, dy[0], x, axes)));
      return absl::OkStatus();
    });

REGISTER_OP("ReduceStd")
    .Input("x")
    .Attr("axes", std::vector<int64_t>{})
    .Attr("keep_dims", false)
    .Attr("correction", int64_t{0})
    .SetShapeFn(VarianceShapeFn)
    .SetKernel([](KernelContext& ctx) { return VarianceKernel(ctx, true); })
    // std = sqrt(var);  dstd/dx = (x - mean) / ((n - c) std).
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      const auto& axes = op.attr<std::vector<int64_t>>("axes");
      const Output x = op.input(0);
      const Output std_dev = ReduceGradLike(s, OutputOf(op), x, axes);
      dx->push_back(Mul(s, VarianceDx(s, op, Div(s, OnesLike(s, x), std_dev)),
                        ReduceGradLike(s, dy[0], x, axes)));
      return absl::OkStatus();
    });

}  // namespace

Output ReduceVariance(const Scope& scope, Output x, std::vector<int64_t> axes,
                      bool keep_dims, int64_t correction) {
  return scope.AddNode("ReduceVariance", {x},
                       {{"axes", std::move(axes)},
                        {"keep_dims", keep_dims},
                        {"correction", correction}});
}

Output ReduceStd(const Scope& scope, Output x, std::vector<int64_t> axes,
                 bool keep_dims, int64_t correction) {
  return scope.AddNode("ReduceStd", {x},
                       {{"axes", std::move(axes)},
                        {"keep_dims", keep_dims},
                        {"correction", correction}});
}

}  // namespace ipuflow::ops
