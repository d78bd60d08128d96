#include "ops/nn/relu.h"

#include <algorithm>

#include "core/half.h"
#include "core/op_registry.h"
#include "ops/cwise.h"
#include "ops/math/half_io.h"
#include "ops/math/vector_kernels.h"
#include "ops/nn/elementwise_grad.h"
#include "ops/shape_fns.h"

namespace ipuflow::ops {
namespace {

// float16 Relu and ReluGrad: chunks widened (F16C), the float32 kernels
// run on them, the results narrowed without rounding (they are input
// values or zero). Eigen's half arithmetic is scalar: 5x slower.
constexpr int64_t kHalfChunk = 1024;

absl::Status ReluHalf(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.shape()));
  const half* px = x.data<half>();
  half* py = y->data<half>();
  const auto relu = UsedVectorKernels().relu;
  ctx.ParallelFor(x.NumElements(), kCwiseCost, [&](int64_t b, int64_t e) {
    float buf[kHalfChunk];
    for (int64_t i = b; i < e; i += kHalfChunk) {
      const int64_t m = std::min(kHalfChunk, e - i);
      WidenFast(px + i, buf, m);
      relu(buf, buf, m);
      NarrowExact(buf, py + i, m);
    }
  });
  return absl::OkStatus();
}

// float32 through the dispatched AVX2 / AVX-512 loops (vector_kernels.h).
absl::Status ReluFloat(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.shape()));
  const float* px = x.data<float>();
  float* py = y->data<float>();
  const auto relu = UsedVectorKernels().relu;
  ctx.ParallelFor(x.NumElements(), kCwiseCost,
                  [&](int64_t b, int64_t e) { relu(px + b, py + b, e - b); });
  return absl::OkStatus();
}

// ReluGrad's dy and y (the forward's output) must match element for element.
absl::Status CheckSameShapes(const KernelContext& ctx, const Tensor& dy,
                             const Tensor& y) {
  if (dy.shape() == y.shape()) return absl::OkStatus();
  return ctx.InvalidArgument("inputs have shapes ", dy.shape().DebugString(),
                             " and ", y.shape().DebugString(),
                             "; they must be equal");
}

absl::Status ReluGradFloat(KernelContext& ctx) {
  const Tensor& dy = ctx.input(0);
  const Tensor& y = ctx.input(1);
  RETURN_IF_ERROR(CheckSameShapes(ctx, dy, y));
  ASSIGN_OR_RETURN(Tensor * dx, ctx.allocate_output(0, dy.shape()));
  const float *pd = dy.data<float>(), *py = y.data<float>();
  float* px = dx->data<float>();
  const auto relu_grad = UsedVectorKernels().relu_grad;
  ctx.ParallelFor(dy.NumElements(), kCwiseCost, [&](int64_t b, int64_t e) {
    relu_grad(pd + b, py + b, px + b, e - b);
  });
  return absl::OkStatus();
}

absl::Status ReluGradHalf(KernelContext& ctx) {
  const Tensor& dy = ctx.input(0);
  const Tensor& y = ctx.input(1);
  RETURN_IF_ERROR(CheckSameShapes(ctx, dy, y));
  ASSIGN_OR_RETURN(Tensor * dx, ctx.allocate_output(0, dy.shape()));
  const half *pd = dy.data<half>(), *py = y.data<half>();
  half* px = dx->data<half>();
  const auto relu_grad = UsedVectorKernels().relu_grad;
  ctx.ParallelFor(dy.NumElements(), kCwiseCost, [&](int64_t b, int64_t e) {
    float d[kHalfChunk], v[kHalfChunk];
    for (int64_t i = b; i < e; i += kHalfChunk) {
      const int64_t m = std::min(kHalfChunk, e - i);
      WidenFast(pd + i, d, m);
      WidenFast(py + i, v, m);
      relu_grad(d, v, d, m);
      NarrowExact(d, px + i, m);
    }
  });
  return absl::OkStatus();
}

REGISTER_OP("Relu")
    .Input("x")
    .SetShapeFn(shape_fns::UnchangedFloat)
    .SetKernel([](KernelContext& ctx) -> absl::Status {
      if (ctx.input(0).dtype() == DType::kFloat16) return ReluHalf(ctx);
      if (ctx.input(0).dtype() == DType::kFloat32) return ReluFloat(ctx);
      return UnsupportedDType(ctx, ctx.input(0).dtype());
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
    .SetShapeFn(shape_fns::SameShapeFloatPair)
    .SetKernel([](KernelContext& ctx) -> absl::Status {
      const DType t = ctx.input(0).dtype();
      if (t != ctx.input(1).dtype()) return UnsupportedDType(ctx, t);
      if (t == DType::kFloat16) return ReluGradHalf(ctx);
      if (t == DType::kFloat32) return ReluGradFloat(ctx);
      return UnsupportedDType(ctx, t);
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
