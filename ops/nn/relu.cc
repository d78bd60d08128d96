#include "ops/nn/relu.h"

#include <algorithm>
#include <type_traits>

#include "core/op_registry.h"
#include "ops/cwise.h"
#include "ops/math/half_io.h"
#include "ops/nn/elementwise_grad.h"
#include "ops/shape_fns.h"

namespace ipuflow::ops {
namespace {

struct ReluFn {
  template <typename A>
  auto operator()(const A& x) const {
    return x.max(typename A::Scalar(0));
  }
};

// dy where y > 0, else 0, as an Eigen functor with a packet form: Eigen
// evaluates `(y > 0).select(dy, 0)` one scalar at a time (its comparisons
// give bool arrays), which made ReluGrad 5x slower than Relu; a compare
// mask and-ed with dy is one vector instruction each.
template <typename T>
struct ReluGradOp {
  EIGEN_STRONG_INLINE T operator()(const T& dy, const T& y) const {
    return y > T(0) ? dy : T(0);
  }
  template <typename Packet>
  EIGEN_STRONG_INLINE Packet packetOp(const Packet& dy, const Packet& y) const {
    namespace ei = Eigen::internal;
    return ei::pand(ei::pcmp_lt(ei::pzero(y), y), dy);  // NaN y: 0, as above.
  }
};

}  // namespace
}  // namespace ipuflow::ops

template <typename T>
struct Eigen::internal::functor_traits<ipuflow::ops::ReluGradOp<T>> {
  enum {
    Cost = Eigen::NumTraits<T>::AddCost,
    PacketAccess = std::is_same_v<T, float>,  // Eigen::half: scalar.
  };
};

namespace ipuflow::ops {
namespace {

// float16 Relu and ReluGrad: chunks widened (F16C), the float32 packet
// code run on them, the results narrowed without rounding (they are input
// values or zero). Eigen's half arithmetic is scalar: 5x slower.
constexpr int64_t kHalfChunk = 1024;

absl::Status ReluHalf(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  ASSIGN_OR_RETURN(Tensor* y, ctx.allocate_output(0, x.shape()));
  const half* px = x.data<half>();
  half* py = y->data<half>();
  ctx.ParallelFor(x.NumElements(), kCwiseCost, [&](int64_t b, int64_t e) {
    float buf[kHalfChunk];
    for (int64_t i = b; i < e; i += kHalfChunk) {
      const int64_t m = std::min(kHalfChunk, e - i);
      WidenFast(px + i, buf, m);
      ArrayMap<float> v(buf, m);
      v = ReluFn()(v);
      NarrowExact(buf, py + i, m);
    }
  });
  return absl::OkStatus();
}

absl::Status ReluGradHalf(KernelContext& ctx) {
  const Tensor& dy = ctx.input(0);
  const Tensor& y = ctx.input(1);
  if (dy.shape() != y.shape()) {
    return ctx.InvalidArgument("inputs have shapes ", dy.shape().DebugString(),
                               " and ", y.shape().DebugString(),
                               "; they must be equal");
  }
  ASSIGN_OR_RETURN(Tensor* dx, ctx.allocate_output(0, dy.shape()));
  const half *pd = dy.data<half>(), *py = y.data<half>();
  half* px = dx->data<half>();
  ctx.ParallelFor(dy.NumElements(), kCwiseCost, [&](int64_t b, int64_t e) {
    float d[kHalfChunk], v[kHalfChunk];
    for (int64_t i = b; i < e; i += kHalfChunk) {
      const int64_t m = std::min(kHalfChunk, e - i);
      WidenFast(pd + i, d, m);
      WidenFast(py + i, v, m);
      ArrayMap<float>(d, m) = ConstArrayMap<float>(d, m).binaryExpr(
          ConstArrayMap<float>(v, m), ReluGradOp<float>());
      NarrowExact(d, px + i, m);
    }
  });
  return absl::OkStatus();
}

// f(dy, y) = dy where y > 0.
struct ReluGradFn {
  template <typename A, typename B>
  auto operator()(const A& dy, const B& y) const {
    using T = typename A::Scalar;
    return dy.binaryExpr(y, ReluGradOp<T>());
  }
};

REGISTER_OP("Relu")
    .Input("x")
    .SetShapeFn(shape_fns::UnchangedFloat)
    .SetKernel([](KernelContext& ctx) -> absl::Status {
      if (ctx.input(0).dtype() == DType::kFloat16) return ReluHalf(ctx);
      IPUFLOW_SWITCH_FLOAT(ctx.input(0).dtype(),
                           return UnaryKernel<T>(ctx, ReluFn()),
                           return UnsupportedDType(ctx, ctx.input(0).dtype()));
    })
    // y = max(x, 0);  dy/dx = 1 where x > 0 (i.e. y > 0), else 0
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      dx->push_back(ReluGrad(s, dy[0], Output(const_cast<Node*>(&op), 0)));
      return absl::OkStatus();
    });

REGISTER_OP("ReluGrad")
    .Input("dy")
    .Input("y")
    .SetShapeFn(SameShapeFloatPair)
    .SetKernel([](KernelContext& ctx) {
      if (ctx.input(0).dtype() == DType::kFloat16) return ReluGradHalf(ctx);
      return ElementwiseGradKernel(ctx, ReluGradFn());
    })
    // dx = dy * [y > 0]:  d/d(dy) = g * [y > 0];  d/dy = 0 almost everywhere
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> g,
                    std::vector<Output>* dx) {
      dx->push_back(ReluGrad(s, g[0], op.input(1)));
      dx->push_back(Output());
      return absl::OkStatus();
    });

}  // namespace

Output Relu(const Scope& scope, Output x) { return scope.AddNode("Relu", {x}); }

Output ReluGrad(const Scope& scope, Output dy, Output y) {
  return scope.AddNode("ReluGrad", {dy, y});
}

}  // namespace ipuflow::ops
