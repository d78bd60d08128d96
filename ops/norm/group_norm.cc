#include "ops/norm/group_norm.h"

#include "absl/strings/str_cat.h"
#include "core/op_registry.h"
#include "ops/math/float32_output.h"
#include "ops/norm/norm_kernels.h"
#include "ops/norm/norm_op_util.h"

namespace ipuflow::ops {
namespace {

absl::StatusOr<NormLayout> LayoutOf(const TensorShape& x,
                                    const AttrMap& attrs) {
  ASSIGN_OR_RETURN(int64_t axis, GetAttr<int64_t>(attrs, "channels_axis"));
  ASSIGN_OR_RETURN(int64_t groups, GetAttr<int64_t>(attrs, "groups"));
  ASSIGN_OR_RETURN(bool strided,
                   GetAttr<bool>(attrs, "strided_channel_grouping"));
  ASSIGN_OR_RETURN(NormLayout l, ChannelLayout(x, axis, groups));
  if (x.dim(l.channels_last ? x.rank() - 1 : 1) != kUnknownDim &&
      groups > l.channels) {
    return absl::InvalidArgumentError(absl::StrCat(
        "groups (", groups, ") exceeds the channel count ", l.channels));
  }
  l.strided = strided;
  return l;
}

int ChannelAxis(const TensorShape& x, const NormLayout& l) {
  return l.channels_last ? x.rank() - 1 : 1;
}

absl::Status GroupNormShape(ShapeContext& c) {
  RETURN_IF_ERROR(c.ExpectFloat(0));
  RETURN_IF_ERROR(c.ExpectSameDType(0, 1));
  RETURN_IF_ERROR(c.ExpectSameDType(0, 2));
  ASSIGN_OR_RETURN(float epsilon, c.attr<float>("epsilon"));
  RETURN_IF_ERROR(CheckEpsilon(epsilon));
  const TensorShape& x = c.input_shape(0);
  ASSIGN_OR_RETURN(NormLayout l, LayoutOf(x, c.attrs()));
  const TensorShape params({x.dim(ChannelAxis(x, l))});
  for (int i : {1, 2}) {
    if (!c.input_shape(i).IsCompatibleWith(params)) {
      return absl::InvalidArgumentError(absl::StrCat(
          c.InputName(i), " has shape ", c.input_shape(i).DebugString(), "; x ",
          x.DebugString(), " has channels ", params.DebugString()));
    }
  }
  c.set_output(0, c.input_dtype(0), x);
  c.set_output(1, DType::kFloat32, TensorShape({x.dim(0), l.groups}));
  c.set_output(2, DType::kFloat32, TensorShape({x.dim(0), l.groups}));
  return absl::OkStatus();
}

absl::Status GroupNormKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  absl::StatusOr<NormLayout> l = LayoutOf(x.shape(), ctx.node().attrs());
  if (!l.ok()) return ctx.InvalidArgument(l.status().message());
  const TensorShape params({x.dim(ChannelAxis(x.shape(), *l))});
  RETURN_IF_ERROR(ExpectParamShape(ctx, 1, params));
  RETURN_IF_ERROR(ExpectParamShape(ctx, 2, params));
  const Tensor x32 = AsFloat32(ctx, x), g32 = AsFloat32(ctx, ctx.input(1)),
               b32 = AsFloat32(ctx, ctx.input(2));
  Float32Output y;
  RETURN_IF_ERROR(y.Allocate(ctx, 0, x.shape()));
  const TensorShape stats({x.dim(0), l->groups});
  ASSIGN_OR_RETURN(Tensor * mean, ctx.allocate_output(1, stats));
  ASSIGN_OR_RETURN(Tensor * inv, ctx.allocate_output(2, stats));
  if (x.NumElements() == 0) return absl::OkStatus();
  RETURN_IF_ERROR(
      NormForward(ctx, *l, NormReplicas{}, x32.data<float>(), g32.data<float>(),
                  b32.data<float>(), ctx.attr<float>("epsilon"), y.data(),
                  mean->data<float>(), nullptr, inv->data<float>()));
  y.Finish(ctx);
  return absl::OkStatus();
}

AttrMap GroupAttrs(const GroupNormOptions& o) {
  return {{"groups", o.groups},
          {"channels_axis", o.channels_axis},
          {"strided_channel_grouping", o.strided_channel_grouping}};
}

GroupNormOptions OptionsOf(const Node& op) {
  GroupNormOptions o;
  o.groups = op.attr<int64_t>("groups");
  o.channels_axis = op.attr<int64_t>("channels_axis");
  o.strided_channel_grouping = op.attr<bool>("strided_channel_grouping");
  return o;
}

REGISTER_OP("GroupNorm")
    .Input("x")
    .Input("gamma")
    .Input("beta")
    .Attr("groups", int64_t{2})
    .Attr("channels_axis", int64_t{-1})
    .Attr("epsilon", 1e-6f)
    .Attr("strided_channel_grouping", true)
    .SetShapeFn(GroupNormShape)
    .SetKernel(GroupNormKernel)
    // See NormBackward (norm_kernels.h).
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      RETURN_IF_ERROR(OnlyOutputZeroDifferentiated(op, dy));
      NormGradOutputs g = GroupNormGrad(
          s, dy[0], op.input(0), op.input(1), Output(const_cast<Node*>(&op), 1),
          Output(const_cast<Node*>(&op), 2), OptionsOf(op));
      *dx = {g.dx, g.dgamma, g.dbeta};
      return absl::OkStatus();
    });

REGISTER_OP("GroupNormGrad")
    .Input("dy")
    .Input("x")
    .Input("gamma")
    .Input("mean")
    .Input("inv_std")
    .Attr("groups", int64_t{2})
    .Attr("channels_axis", int64_t{-1})
    .Attr("strided_channel_grouping", true)
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      RETURN_IF_ERROR(c.ExpectFloat(1));
      RETURN_IF_ERROR(c.ExpectSameDType(0, 1));
      RETURN_IF_ERROR(c.ExpectSameDType(1, 2));
      RETURN_IF_ERROR(c.ExpectDType(3, DType::kFloat32));
      RETURN_IF_ERROR(c.ExpectDType(4, DType::kFloat32));
      RETURN_IF_ERROR(LayoutOf(c.input_shape(1), c.attrs()).status());
      c.set_output(0, c.input_dtype(1), c.input_shape(1));
      c.set_output(1, c.input_dtype(2), c.input_shape(2));
      c.set_output(2, c.input_dtype(2), c.input_shape(2));
      return absl::OkStatus();
    })
    .SetKernel([](KernelContext& ctx) -> absl::Status {
      const Tensor& x = ctx.input(1);
      absl::StatusOr<NormLayout> l = LayoutOf(x.shape(), ctx.node().attrs());
      if (!l.ok()) return ctx.InvalidArgument(l.status().message());
      const TensorShape stats({x.dim(0), l->groups});
      RETURN_IF_ERROR(ExpectParamShape(ctx, 0, x.shape()));
      RETURN_IF_ERROR(ExpectParamShape(
          ctx, 2, TensorShape({x.dim(ChannelAxis(x.shape(), *l))})));
      RETURN_IF_ERROR(ExpectParamShape(ctx, 3, stats));
      RETURN_IF_ERROR(ExpectParamShape(ctx, 4, stats));
      return RunNormBackward(ctx, *l, NormReplicas{});
    })
    .NotDifferentiable(
        "second-order gradients of normalisation are not implemented");

}  // namespace

NormOutputs GroupNorm(const Scope& scope, Output x, Output gamma, Output beta,
                      const GroupNormOptions& options) {
  AttrMap attrs = GroupAttrs(options);
  attrs["epsilon"] = options.epsilon;
  Node* n = scope.AddNode("GroupNorm", {x, gamma, beta}, std::move(attrs));
  if (n == nullptr) return {};
  return {Output(n, 0), Output(n, 1), Output(n, 2)};
}

NormOutputs InstanceNorm(const Scope& scope, Output x, Output gamma,
                         Output beta, const GroupNormOptions& options) {
  if (!scope.ok() || !x.valid()) return {};
  const TensorShape& shape = x.shape();
  absl::StatusOr<NormLayout> l = ChannelLayout(shape, options.channels_axis, 1);
  if (!l.ok()) {
    scope.UpdateStatus(absl::InvalidArgumentError(
        absl::StrCat("InstanceNorm: ", l.status().message())));
    return {};
  }
  const int64_t c = shape.dim(l->channels_last ? shape.rank() - 1 : 1);
  if (c == kUnknownDim) {
    scope.UpdateStatus(absl::InvalidArgumentError(
        absl::StrCat("InstanceNorm: the channel count of x ",
                     shape.DebugString(), " must be known")));
    return {};
  }
  GroupNormOptions o = options;
  o.groups = c;
  return GroupNorm(scope, x, gamma, beta, o);
}

NormGradOutputs GroupNormGrad(const Scope& scope, Output dy, Output x,
                              Output gamma, Output mean, Output inv_std,
                              const GroupNormOptions& options) {
  Node* n = scope.AddNode("GroupNormGrad", {dy, x, gamma, mean, inv_std},
                          GroupAttrs(options));
  if (n == nullptr) return {};
  return {Output(n, 0), Output(n, 1), Output(n, 2)};
}

}  // namespace ipuflow::ops
