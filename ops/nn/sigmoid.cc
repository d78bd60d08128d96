#include "ops/nn/sigmoid.h"

#include "core/op_registry.h"
#include "ops/array/const.h"
#include "ops/cwise.h"
#include "ops/math/mul.h"
#include "ops/math/sub.h"
#include "ops/math/vector_math.h"
#include "ops/nn/elementwise_grad.h"
#include "ops/shape_fns.h"

namespace ipuflow::ops {
namespace {

// f(y, dy) = dy * y * (1 - y).
struct SigmoidGradFn {
  template <typename A, typename B>
  auto operator()(const A& y, const B& dy) const {
    using T = typename A::Scalar;
    return dy * y * (T(1) - y);
  }
};

REGISTER_OP("Sigmoid")
    .Input("x")
    .SetShapeFn(shape_fns::UnchangedFloat)
    .SetKernel([](KernelContext& ctx) {
      return UnaryArrayKernel(ctx, VecSigmoid, 3 * kCwiseCost);
    })
    // y = 1 / (1 + e^-x);  dy/dx = y (1 - y)
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      dx->push_back(SigmoidGrad(s, Output(const_cast<Node*>(&op), 0), dy[0]));
      return absl::OkStatus();
    });

REGISTER_OP("SigmoidGrad")
    .Input("y")
    .Input("dy")
    .SetShapeFn(shape_fns::SameShapeFloatPair)
    .SetKernel([](KernelContext& ctx) {
      return ElementwiseGradKernel(ctx, SigmoidGradFn());
    })
    // z = dy * y * (1 - y):  dz/dy = dy * (1 - 2y);  dz/d(dy) = y (1 - y)
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> g,
                    std::vector<Output>* dx) {
      const Output y = op.input(0), dy = op.input(1);
      const DType t = y.dtype();
      Output one_minus_2y =
          Sub(s, Const(s, 1.0, t), Mul(s, Const(s, 2.0, t), y));
      dx->push_back(Mul(s, Mul(s, g[0], dy), one_minus_2y));
      dx->push_back(SigmoidGrad(s, y, g[0]));
      return absl::OkStatus();
    });

}  // namespace

Output Sigmoid(const Scope& scope, Output x) {
  return scope.AddNode("Sigmoid", {x});
}

Output SigmoidGrad(const Scope& scope, Output y, Output dy) {
  return scope.AddNode("SigmoidGrad", {y, dy});
}

}  // namespace ipuflow::ops
