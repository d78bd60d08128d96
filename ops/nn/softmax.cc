#include "ops/nn/softmax.h"

#include "core/half.h"
#include "core/op_registry.h"
#include "ops/math/mul.h"
#include "ops/math/reduce_sum.h"
#include "ops/math/sub.h"
#include "ops/math/vector_math.h"
#include "ops/nn/rowwise.h"

namespace ipuflow::ops {
namespace {

REGISTER_OP("Softmax")
    .Input("logits")
    .SetShapeFn(RowwiseShape)
    .SetKernel([](KernelContext& ctx) {
      return RowwiseKernel(ctx, 20, [](const RowInputs& in, Eigen::ArrayXf& y) {
        y = in[0] - in[0].maxCoeff();
        VecExp(y.data(), y.data(), y.size());
        y /= y.sum();
      });
    })
    // y = softmax(x);  dy_i/dx_j = y_i (delta_ij - y_j)
    //   => dx = (dy - sum(dy * y)) * y   (SoftmaxGrad)
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      dx->push_back(SoftmaxGrad(s, Output(const_cast<Node*>(&op), 0), dy[0]));
      return absl::OkStatus();
    });

REGISTER_OP("SoftmaxGrad")
    .Input("y")
    .Input("dy")
    .SetShapeFn(RowwiseShape)
    .SetKernel([](KernelContext& ctx) {
      return RowwiseKernel(ctx, 4, [](const RowInputs& in, Eigen::ArrayXf& dx) {
        dx = (in[1] - (in[0] * in[1]).sum()) * in[0];
      });
    })
    // z = (dy - sum(dy * y)) * y, sums over the last axis:
    //   dz/d(dy) = SoftmaxGrad(y, g);  dz/dy = g (dy - sum(dy y)) - dy sum(g y)
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> g,
                    std::vector<Output>* dx) {
      const Output y = op.input(0), dy = op.input(1);
      Output dy_y = ReduceSum(s, Mul(s, dy, y), {-1}, /*keep_dims=*/true);
      Output g_y = ReduceSum(s, Mul(s, g[0], y), {-1}, /*keep_dims=*/true);
      dx->push_back(Sub(s, Mul(s, g[0], Sub(s, dy, dy_y)), Mul(s, dy, g_y)));
      dx->push_back(SoftmaxGrad(s, y, g[0]));
      return absl::OkStatus();
    });

}  // namespace

Output Softmax(const Scope& scope, Output logits) {
  return scope.AddNode("Softmax", {logits});
}

Output SoftmaxGrad(const Scope& scope, Output y, Output dy) {
  return scope.AddNode("SoftmaxGrad", {y, dy});
}

}  // namespace ipuflow::ops
