#include "ops/nn/log_softmax.h"

#include <cmath>

#include "core/half.h"
#include "core/op_registry.h"
#include "ops/math/exp.h"
#include "ops/math/mul.h"
#include "ops/math/neg.h"
#include "ops/math/reduce_sum.h"
#include "ops/math/sub.h"
#include "ops/math/vector_math.h"
#include "ops/nn/rowwise.h"

namespace ipuflow::ops {
namespace {

REGISTER_OP("LogSoftmax")
    .Input("logits")
    .SetShapeFn(RowwiseShape)
    .SetKernel([](KernelContext& ctx) {
      return RowwiseKernel(ctx, 20, [](const RowInputs& in, Eigen::ArrayXf& y) {
        const float m = in[0].maxCoeff();
        y = in[0] - m;
        VecExp(y.data(), y.data(), y.size());
        const float log_sum = std::log(y.sum());
        y = (in[0] - m) - log_sum;
      });
    })
    // y = x - log(sum(exp(x)));  dy_i/dx_j = delta_ij - softmax(x)_j
    //   => dx = dy - exp(y) * sum(dy)   (LogSoftmaxGrad)
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      dx->push_back(
          LogSoftmaxGrad(s, Output(const_cast<Node*>(&op), 0), dy[0]));
      return absl::OkStatus();
    });

REGISTER_OP("LogSoftmaxGrad")
    .Input("y")
    .Input("dy")
    .SetShapeFn(RowwiseShape)
    .SetKernel([](KernelContext& ctx) {
      return RowwiseKernel(ctx, 12,
                           [](const RowInputs& in, Eigen::ArrayXf& dx) {
                             VecExp(in[0].data(), dx.data(), dx.size());
                             dx = in[1] - dx * in[1].sum();
                           });
    })
    // z = dy - exp(y) sum(dy), sum over the last axis:
    //   dz/dy = -g exp(y) sum(dy);  dz/d(dy) = g - sum(g exp(y))
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> g,
                    std::vector<Output>* dx) {
      const Output y = op.input(0), dy = op.input(1);
      Output e = Exp(s, y);
      Output ge = Mul(s, g[0], e);
      dx->push_back(
          Neg(s, Mul(s, ge, ReduceSum(s, dy, {-1}, /*keep_dims=*/true))));
      dx->push_back(Sub(s, g[0], ReduceSum(s, ge, {-1}, /*keep_dims=*/true)));
      return absl::OkStatus();
    });

}  // namespace

Output LogSoftmax(const Scope& scope, Output logits) {
  return scope.AddNode("LogSoftmax", {logits});
}

Output LogSoftmaxGrad(const Scope& scope, Output y, Output dy) {
  return scope.AddNode("LogSoftmaxGrad", {y, dy});
}

}  // namespace ipuflow::ops
