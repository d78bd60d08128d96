#include "ops/norm/layer_norm.h"

#include "absl/strings/str_cat.h"
#include "core/op_registry.h"
#include "ops/math/float32_output.h"
#include "ops/norm/norm_kernels.h"
#include "ops/norm/norm_op_util.h"

namespace ipuflow::ops {
namespace {

// The normalised axis, checked against x's rank.
absl::StatusOr<int> BeginAxis(int64_t begin, int rank) {
  if (rank < 1 || begin < -rank || begin >= rank) {
    return absl::InvalidArgumentError(absl::StrCat(
        "begin_norm_axis ", begin, " is out of range for x of rank ", rank));
  }
  return static_cast<int>(begin < 0 ? begin + rank : begin);
}

// x viewed as [tokens, features]: one statistic per token.
NormLayout TokenLayout(const TensorShape& shape, int axis) {
  NormLayout l;
  l.batch = shape.DimProduct(0, axis);
  l.channels = shape.DimProduct(axis, shape.rank());
  return l;
}

TensorShape Tail(const TensorShape& s, int axis) {
  return TensorShape(s.dims().subspan(axis));
}
TensorShape Head(const TensorShape& s, int axis) {
  return TensorShape(s.dims().subspan(0, axis));
}

absl::Status LayerNormShape(ShapeContext& c) {
  RETURN_IF_ERROR(c.ExpectFloat(0));
  RETURN_IF_ERROR(c.ExpectSameDType(0, 1));
  RETURN_IF_ERROR(c.ExpectSameDType(0, 2));
  ASSIGN_OR_RETURN(int64_t begin, c.attr<int64_t>("begin_norm_axis"));
  ASSIGN_OR_RETURN(float epsilon, c.attr<float>("epsilon"));
  RETURN_IF_ERROR(CheckEpsilon(epsilon));
  const TensorShape& x = c.input_shape(0);
  ASSIGN_OR_RETURN(int axis, BeginAxis(begin, x.rank()));
  for (int i : {1, 2}) {
    if (!c.input_shape(i).IsCompatibleWith(Tail(x, axis))) {
      return absl::InvalidArgumentError(absl::StrCat(
          c.InputName(i), " has shape ", c.input_shape(i).DebugString(),
          " but x ", x.DebugString(), " is normalised over ",
          Tail(x, axis).DebugString(), " (begin_norm_axis ", begin, ")"));
    }
  }
  c.set_output(0, c.input_dtype(0), x);
  c.set_output(1, DType::kFloat32, Head(x, axis));
  c.set_output(2, DType::kFloat32, Head(x, axis));
  return absl::OkStatus();
}

absl::Status LayerNormKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int axis = *BeginAxis(ctx.attr<int64_t>("begin_norm_axis"), x.rank());
  RETURN_IF_ERROR(ExpectParamShape(ctx, 1, Tail(x.shape(), axis)));
  RETURN_IF_ERROR(ExpectParamShape(ctx, 2, Tail(x.shape(), axis)));
  const NormLayout l = TokenLayout(x.shape(), axis);
  const Tensor x32 = AsFloat32(ctx, x), g32 = AsFloat32(ctx, ctx.input(1)),
               b32 = AsFloat32(ctx, ctx.input(2));
  Float32Output y;
  RETURN_IF_ERROR(y.Allocate(ctx, 0, x.shape()));
  ASSIGN_OR_RETURN(Tensor * mean,
                   ctx.allocate_output(1, Head(x.shape(), axis)));
  ASSIGN_OR_RETURN(Tensor * inv, ctx.allocate_output(2, Head(x.shape(), axis)));
  if (x.NumElements() == 0) return absl::OkStatus();
  RETURN_IF_ERROR(
      NormForward(ctx, l, NormReplicas{}, x32.data<float>(), g32.data<float>(),
                  b32.data<float>(), ctx.attr<float>("epsilon"), y.data(),
                  mean->data<float>(), nullptr, inv->data<float>()));
  y.Finish(ctx);
  return absl::OkStatus();
}

REGISTER_OP("LayerNorm")
    .Input("x")
    .Input("gamma")
    .Input("beta")
    .Attr("begin_norm_axis", int64_t{-1})
    .Attr("epsilon", 1e-3f)
    .SetShapeFn(LayerNormShape)
    .SetKernel(LayerNormKernel)
    // See NormBackward (norm_kernels.h); the statistics are outputs for the
    // gradient, not differentiated themselves.
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      RETURN_IF_ERROR(OnlyOutputZeroDifferentiated(op, dy));
      NormGradOutputs g = LayerNormGrad(s, dy[0], op.input(0), op.input(1),
                                        Output(const_cast<Node*>(&op), 1),
                                        Output(const_cast<Node*>(&op), 2),
                                        op.attr<int64_t>("begin_norm_axis"));
      *dx = {g.dx, g.dgamma, g.dbeta};
      return absl::OkStatus();
    });

REGISTER_OP("LayerNormGrad")
    .Input("dy")
    .Input("x")
    .Input("gamma")
    .Input("mean")
    .Input("inv_std")
    .Attr("begin_norm_axis", int64_t{-1})
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      RETURN_IF_ERROR(c.ExpectFloat(1));
      RETURN_IF_ERROR(c.ExpectSameDType(0, 1));
      RETURN_IF_ERROR(c.ExpectSameDType(1, 2));
      RETURN_IF_ERROR(c.ExpectDType(3, DType::kFloat32));
      RETURN_IF_ERROR(c.ExpectDType(4, DType::kFloat32));
      ASSIGN_OR_RETURN(int64_t begin, c.attr<int64_t>("begin_norm_axis"));
      RETURN_IF_ERROR(BeginAxis(begin, c.input_shape(1).rank()).status());
      c.set_output(0, c.input_dtype(1), c.input_shape(1));
      c.set_output(1, c.input_dtype(2), c.input_shape(2));
      c.set_output(2, c.input_dtype(2), c.input_shape(2));
      return absl::OkStatus();
    })
    .SetKernel([](KernelContext& ctx) -> absl::Status {
      const Tensor& x = ctx.input(1);
      const int axis =
          *BeginAxis(ctx.attr<int64_t>("begin_norm_axis"), x.rank());
      RETURN_IF_ERROR(ExpectParamShape(ctx, 0, x.shape()));
      RETURN_IF_ERROR(ExpectParamShape(ctx, 2, Tail(x.shape(), axis)));
      RETURN_IF_ERROR(ExpectParamShape(ctx, 3, Head(x.shape(), axis)));
      RETURN_IF_ERROR(ExpectParamShape(ctx, 4, Head(x.shape(), axis)));
      return RunNormBackward(ctx, TokenLayout(x.shape(), axis), NormReplicas{});
    })
    .NotDifferentiable(
        "second-order gradients of normalisation are not implemented");

}  // namespace

NormOutputs LayerNorm(const Scope& scope, Output x, Output gamma, Output beta,
                      const LayerNormOptions& options) {
  Node* n = scope.AddNode("LayerNorm", {x, gamma, beta},
                          {{"begin_norm_axis", options.begin_norm_axis},
                           {"epsilon", options.epsilon}});
  if (n == nullptr) return {};
  return {Output(n, 0), Output(n, 1), Output(n, 2)};
}

NormGradOutputs LayerNormGrad(const Scope& scope, Output dy, Output x,
                              Output gamma, Output mean, Output inv_std,
                              int64_t begin_norm_axis) {
  Node* n = scope.AddNode("LayerNormGrad", {dy, x, gamma, mean, inv_std},
                          {{"begin_norm_axis", begin_norm_axis}});
  if (n == nullptr) return {};
  return {Output(n, 0), Output(n, 1), Output(n, 2)};
}

}  // namespace ipuflow::ops
