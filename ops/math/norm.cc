#include "ops/math/norm.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/op_registry.h"
#include "ops/array/const.h"
#include "ops/array/fill.h"
#include "ops/math/abs.h"
#include "ops/math/broadcast_grad.h"
#include "ops/math/div.h"
#include "ops/math/equal.h"
#include "ops/math/mul.h"
#include "ops/math/pow.h"
#include "ops/math/reduce_grad_like.h"
#include "ops/math/reduce_max.h"
#include "ops/math/reduction.h"
#include "ops/math/select.h"
#include "ops/math/sign.h"

namespace ipuflow::ops {
namespace {

// (sum |row|^ord)^(1/ord), scaled by the largest |row| (LAPACK's nrm2
// idea): every term is in [0, 1], so the sum neither overflows nor loses
// the small terms to underflow.
float NormRow(const float* row, int64_t r, float ord) {
  float scale = 0;
  for (int64_t i = 0; i < r; ++i) {
    const float a = std::fabs(row[i]);
    if (std::isnan(a)) return a;
    scale = std::max(scale, a);
  }
  if (std::isinf(ord) || scale == 0 || std::isinf(scale)) return scale;
  constexpr int64_t kChunk = 1024;
  float buf[kChunk];
  std::vector<float> partial;
  for (int64_t i = 0; i < r; i += kChunk) {
    const int64_t c = std::min(kChunk, r - i);
    for (int64_t j = 0; j < c; ++j) {
      const float a = std::fabs(row[i + j]) / scale;
      buf[j] = ord == 1 ? a : ord == 2 ? a * a : std::pow(a, ord);
    }
    partial.push_back(PairwiseSum(buf, c));
  }
  const float s =
      PairwiseSum(partial.data(), static_cast<int64_t>(partial.size()));
  const float root = ord == 1   ? s
                     : ord == 2 ? std::sqrt(s)
                                : std::pow(s, 1 / ord);
  return scale * root;
}

REGISTER_OP("Norm")
    .Input("x")
    .Attr("axes", std::vector<int64_t>{})
    .Attr("keep_dims", false)
    .Attr("ord", 2.0f)
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      ASSIGN_OR_RETURN(float ord, c.attr<float>("ord"));
      if (!(ord > 0)) {
        return absl::InvalidArgumentError(
            absl::StrCat("ord is ", ord, "; expected > 0 (inf allowed)"));
      }
      return FloatReductionShapeFn(c);
    })
    .SetKernel([](KernelContext& ctx) {
      const float ord = ctx.attr<float>("ord");
      return RowReductionKernel(ctx, [ord](const float* row, int64_t r) {
        return NormRow(row, r, ord);
      });
    })
    // y = (sum |x|^p)^(1/p);  dy/dx = sign(x) (|x| / y)^(p - 1), 0 where
    // y = 0. p = inf: y = max |x|, the gradient of ReduceMax on |x| times
    // sign(x).
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      const Output x = op.input(0), y = OutputOf(op);
      const auto& axes = op.attr<std::vector<int64_t>>("axes");
      const float ord = op.attr<float>("ord");
      const Output sign = Sign(s, x);
      if (std::isinf(ord)) {
        dx->push_back(Mul(s, sign,
                          ReduceExtremumGradient(s, Abs(s, x), y, dy[0], axes,
                                                 op.attr<bool>("keep_dims"))));
        return absl::OkStatus();
      }
      const Output dyb = ReduceGradLike(s, dy[0], x, axes);
      if (ord == 1) {
        dx->push_back(Mul(s, sign, dyb));
        return absl::OkStatus();
      }
      const Output yb = ReduceGradLike(s, y, x, axes);
      const Output zero = ZerosLike(s, x);
      const Output is_zero = Equal(s, yb, zero);
      Output ratio = Div(s, Abs(s, x), Select(s, is_zero, OnesLike(s, x), yb));
      if (ord != 2) ratio = Pow(s, ratio, Const(s, ord - 1.0, x.dtype()));
      dx->push_back(Mul(s, Select(s, is_zero, zero, Mul(s, sign, ratio)), dyb));
      return absl::OkStatus();
    });

}  // namespace

Output Norm(const Scope& scope, Output x, std::vector<int64_t> axes,
            bool keep_dims, float ord) {
  return scope.AddNode(
      "Norm", {x},
      {{"axes", std::move(axes)}, {"keep_dims", keep_dims}, {"ord", ord}});
}

}  // namespace ipuflow::ops
