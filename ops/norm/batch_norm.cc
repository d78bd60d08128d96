#include "ops/norm/batch_norm.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/op_registry.h"
#include "ops/array/const.h"
#include "ops/array/fill.h"
#include "ops/collective/replica_groups_attr.h"
#include "ops/math/add.h"
#include "ops/math/float32_output.h"
#include "ops/math/mul.h"
#include "ops/norm/norm_kernels.h"
#include "ops/norm/norm_op_util.h"
#include "ops/state/assign.h"

namespace ipuflow::ops {
namespace {

// One statistic per channel, over the batch and every spatial position.
absl::StatusOr<NormLayout> LayoutOf(const TensorShape& x, int64_t axis) {
  ASSIGN_OR_RETURN(NormLayout l, ChannelLayout(x, axis, 1));
  l.groups = l.channels;
  l.across_batch = true;
  return l;
}

int64_t Channels(const TensorShape& x, const NormLayout& l) {
  return x.dim(l.channels_last ? x.rank() - 1 : 1);
}

NormReplicas ReplicasOf(const AttrMap& attrs) {
  NormReplicas r;
  absl::StatusOr<int64_t> size = GetAttr<int64_t>(attrs, "replica_group_size");
  r.local = !size.ok() || *size == 1;
  if (!r.local) r.groups = GroupsOf(attrs);
  return r;
}

absl::StatusOr<NormLayout> KernelLayout(const KernelContext& ctx,
                                        const Tensor& x) {
  absl::StatusOr<NormLayout> l =
      LayoutOf(x.shape(), ctx.attr<int64_t>("channels_axis"));
  if (!l.ok()) return ctx.InvalidArgument(l.status().message());
  return l;
}

// x, gamma, beta (and mean, variance for inference) checked; outputs from
// `first_stat` on are [C] float32.
absl::Status CheckParams(ShapeContext& c, int params_end) {
  RETURN_IF_ERROR(c.ExpectFloat(0));
  for (int i = 1; i < 3; ++i) RETURN_IF_ERROR(c.ExpectSameDType(0, i));
  for (int i = 3; i < params_end; ++i) {
    if (c.input_dtype(i) != DType::kFloat32) {
      RETURN_IF_ERROR(c.ExpectSameDType(0, i));
    }
  }
  ASSIGN_OR_RETURN(float epsilon, c.attr<float>("epsilon"));
  RETURN_IF_ERROR(CheckEpsilon(epsilon));
  const TensorShape& x = c.input_shape(0);
  ASSIGN_OR_RETURN(NormLayout l,
                   LayoutOf(x, *c.attr<int64_t>("channels_axis")));
  const TensorShape params({Channels(x, l)});
  for (int i = 1; i < params_end; ++i) {
    if (!c.input_shape(i).IsCompatibleWith(params)) {
      return absl::InvalidArgumentError(absl::StrCat(
          c.InputName(i), " has shape ", c.input_shape(i).DebugString(), "; x ",
          x.DebugString(), " has channels ", params.DebugString()));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckKernelParams(const KernelContext& ctx, const Tensor& x,
                               const NormLayout& l, int first, int end) {
  const TensorShape params({Channels(x.shape(), l)});
  for (int i = first; i < end; ++i) {
    RETURN_IF_ERROR(ExpectParamShape(ctx, i, params));
  }
  return absl::OkStatus();
}

AttrMap ReplicaAttrs(const BatchNormOptions& o) {
  return {{"replica_group_size", o.replica_group_size},
          {"replica_group_type", o.replica_group_type}};
}

REGISTER_OP("BatchNorm")
    .Input("x")
    .Input("gamma")
    .Input("beta")
    .Attr("channels_axis", int64_t{-1})
    .Attr("epsilon", 1e-3f)
    .Attr("replica_group_size", int64_t{1})
    .Attr("replica_group_type", "consecutive")
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      RETURN_IF_ERROR(CheckParams(c, 3));
      RETURN_IF_ERROR(CheckGroupAttrs(c));
      const TensorShape params({c.input_shape(1).rank() == 1
                                    ? c.input_shape(1).dim(0)
                                    : kUnknownDim});
      c.set_output(0, c.input_dtype(0), c.input_shape(0));
      for (int i = 1; i < 4; ++i) c.set_output(i, DType::kFloat32, params);
      return absl::OkStatus();
    })
    .SetKernel([](KernelContext& ctx) -> absl::Status {
      const Tensor& x = ctx.input(0);
      ASSIGN_OR_RETURN(NormLayout l, KernelLayout(ctx, x));
      RETURN_IF_ERROR(CheckKernelParams(ctx, x, l, 1, 3));
      const Tensor x32 = AsFloat32(ctx, x), g32 = AsFloat32(ctx, ctx.input(1)),
                   b32 = AsFloat32(ctx, ctx.input(2));
      Float32Output y;
      RETURN_IF_ERROR(y.Allocate(ctx, 0, x.shape()));
      Tensor* stats[3];
      for (int i = 0; i < 3; ++i) {
        ASSIGN_OR_RETURN(stats[i], ctx.allocate_output(i + 1, g32.shape()));
      }
      if (x.NumElements() == 0) {
        return ctx.InvalidArgument("x ", x.shape().DebugString(),
                                   " is empty: no batch statistics");
      }
      RETURN_IF_ERROR(NormForward(
          ctx, l, ReplicasOf(ctx.node().attrs()), x32.data<float>(),
          g32.data<float>(), b32.data<float>(), ctx.attr<float>("epsilon"),
          y.data(), stats[0]->data<float>(), stats[1]->data<float>(),
          stats[2]->data<float>()));
      y.Finish(ctx);
      return absl::OkStatus();
    })
    // See NormBackward (norm_kernels.h): its means are over the same
    // replicas as the statistics.
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      RETURN_IF_ERROR(OnlyOutputZeroDifferentiated(op, dy));
      Node* n = s.AddNode(
          "BatchNormGrad",
          {dy[0], op.input(0), op.input(1), Output(const_cast<Node*>(&op), 1),
           Output(const_cast<Node*>(&op), 3)},
          {{"channels_axis", op.attr<int64_t>("channels_axis")},
           {"replica_group_size", op.attr<int64_t>("replica_group_size")},
           {"replica_group_type", op.attr<std::string>("replica_group_type")}});
      if (n == nullptr) return s.status();
      *dx = {Output(n, 0), Output(n, 1), Output(n, 2)};
      return absl::OkStatus();
    });

REGISTER_OP("BatchNormGrad")
    .Input("dy")
    .Input("x")
    .Input("gamma")
    .Input("mean")
    .Input("inv_std")
    .Attr("channels_axis", int64_t{-1})
    .Attr("replica_group_size", int64_t{1})
    .Attr("replica_group_type", "consecutive")
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      RETURN_IF_ERROR(c.ExpectFloat(1));
      RETURN_IF_ERROR(c.ExpectSameDType(0, 1));
      RETURN_IF_ERROR(c.ExpectSameDType(1, 2));
      RETURN_IF_ERROR(c.ExpectDType(3, DType::kFloat32));
      RETURN_IF_ERROR(c.ExpectDType(4, DType::kFloat32));
      RETURN_IF_ERROR(CheckGroupAttrs(c));
      RETURN_IF_ERROR(
          LayoutOf(c.input_shape(1), *c.attr<int64_t>("channels_axis"))
              .status());
      c.set_output(0, c.input_dtype(1), c.input_shape(1));
      c.set_output(1, c.input_dtype(2), c.input_shape(2));
      c.set_output(2, c.input_dtype(2), c.input_shape(2));
      return absl::OkStatus();
    })
    .SetKernel([](KernelContext& ctx) -> absl::Status {
      const Tensor& x = ctx.input(1);
      ASSIGN_OR_RETURN(NormLayout l, KernelLayout(ctx, x));
      RETURN_IF_ERROR(ExpectParamShape(ctx, 0, x.shape()));
      RETURN_IF_ERROR(CheckKernelParams(ctx, x, l, 2, 5));
      return RunNormBackward(ctx, l, ReplicasOf(ctx.node().attrs()));
    })
    .NotDifferentiable(
        "second-order gradients of normalisation are not implemented");

// inv_std from the variance, in float64 as NormForward computes it.
std::vector<float> InvStd(const Tensor& var32, float epsilon) {
  std::vector<float> inv(var32.NumElements());
  const float* v = var32.data<float>();
  for (size_t i = 0; i < inv.size(); ++i) {
    inv[i] = static_cast<float>(1.0 / std::sqrt(double{v[i]} + epsilon));
  }
  return inv;
}

REGISTER_OP("BatchNormInference")
    .Input("x")
    .Input("gamma")
    .Input("beta")
    .Input("mean")
    .Input("variance")
    .Attr("channels_axis", int64_t{-1})
    .Attr("epsilon", 1e-3f)
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      RETURN_IF_ERROR(CheckParams(c, 5));
      c.set_output(0, c.input_dtype(0), c.input_shape(0));
      return absl::OkStatus();
    })
    .SetKernel([](KernelContext& ctx) -> absl::Status {
      const Tensor& x = ctx.input(0);
      ASSIGN_OR_RETURN(NormLayout l, KernelLayout(ctx, x));
      RETURN_IF_ERROR(CheckKernelParams(ctx, x, l, 1, 5));
      const Tensor x32 = AsFloat32(ctx, x), g32 = AsFloat32(ctx, ctx.input(1)),
                   b32 = AsFloat32(ctx, ctx.input(2)),
                   m32 = AsFloat32(ctx, ctx.input(3)),
                   v32 = AsFloat32(ctx, ctx.input(4));
      Float32Output y;
      RETURN_IF_ERROR(y.Allocate(ctx, 0, x.shape()));
      const std::vector<float> inv = InvStd(v32, ctx.attr<float>("epsilon"));
      NormApply(ctx, l, x32.data<float>(), g32.data<float>(), b32.data<float>(),
                m32.data<float>(), inv.data(), y.data());
      y.Finish(ctx);
      return absl::OkStatus();
    })
    // y = (x - m) inv gamma + beta, inv = (v + eps)^-1/2: see
    // NormApplyBackward (norm_kernels.h).
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      std::vector<Output> in = {dy[0]};
      for (int i = 0; i < 5; ++i) {
        if (i != 2) in.push_back(op.input(i));
      }
      Node* n = s.AddNode("BatchNormInferenceGrad", in,
                          {{"channels_axis", op.attr<int64_t>("channels_axis")},
                           {"epsilon", op.attr<float>("epsilon")}});
      if (n == nullptr) return s.status();
      *dx = {Output(n, 0), Output(n, 1), Output(n, 2), Output(n, 3),
             Output(n, 4)};
      return absl::OkStatus();
    });

REGISTER_OP("BatchNormInferenceGrad")
    .Input("dy")
    .Input("x")
    .Input("gamma")
    .Input("mean")
    .Input("variance")
    .Attr("channels_axis", int64_t{-1})
    .Attr("epsilon", 1e-3f)
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      RETURN_IF_ERROR(c.ExpectFloat(1));
      RETURN_IF_ERROR(c.ExpectSameDType(0, 1));
      RETURN_IF_ERROR(c.ExpectSameDType(1, 2));
      RETURN_IF_ERROR(
          LayoutOf(c.input_shape(1), *c.attr<int64_t>("channels_axis"))
              .status());
      c.set_output(0, c.input_dtype(1), c.input_shape(1));
      for (int i = 1; i < 3; ++i) {
        c.set_output(i, c.input_dtype(2), c.input_shape(2));
      }
      c.set_output(3, c.input_dtype(3), c.input_shape(3));
      c.set_output(4, c.input_dtype(4), c.input_shape(4));
      return absl::OkStatus();
    })
    .SetKernel([](KernelContext& ctx) -> absl::Status {
      const Tensor& x = ctx.input(1);
      ASSIGN_OR_RETURN(NormLayout l, KernelLayout(ctx, x));
      RETURN_IF_ERROR(ExpectParamShape(ctx, 0, x.shape()));
      RETURN_IF_ERROR(CheckKernelParams(ctx, x, l, 2, 5));
      const Tensor dy32 = AsFloat32(ctx, ctx.input(0)), x32 = AsFloat32(ctx, x),
                   g32 = AsFloat32(ctx, ctx.input(2)),
                   m32 = AsFloat32(ctx, ctx.input(3)),
                   v32 = AsFloat32(ctx, ctx.input(4));
      const std::vector<float> inv = InvStd(v32, ctx.attr<float>("epsilon"));
      Float32Output out[5];
      RETURN_IF_ERROR(out[0].Allocate(ctx, 0, x.shape()));
      for (int i = 1; i < 5; ++i) {
        RETURN_IF_ERROR(out[i].Allocate(ctx, i, g32.shape()));
        std::fill_n(out[i].data(), g32.NumElements(), 0.0f);
      }
      if (x.NumElements() > 0) {
        NormApplyBackward(ctx, l, dy32.data<float>(), x32.data<float>(),
                          g32.data<float>(), m32.data<float>(), inv.data(),
                          out[0].data(), out[1].data(), out[2].data(),
                          out[3].data(), out[4].data());
      }
      for (Float32Output& o : out) o.Finish(ctx);
      return absl::OkStatus();
    })
    .NotDifferentiable(
        "second-order gradients of normalisation are not implemented");

}  // namespace

BatchNormOutputs BatchNorm(const Scope& scope, Output x, Output gamma,
                           Output beta, const BatchNormOptions& options) {
  AttrMap attrs = ReplicaAttrs(options);
  attrs["channels_axis"] = options.channels_axis;
  attrs["epsilon"] = options.epsilon;
  Node* n = scope.AddNode("BatchNorm", {x, gamma, beta}, std::move(attrs));
  if (n == nullptr) return {};
  return {Output(n, 0), Output(n, 1), Output(n, 2), Output(n, 3)};
}

Output BatchNormInference(const Scope& scope, Output x, Output gamma,
                          Output beta, Output mean, Output variance,
                          const BatchNormOptions& options) {
  return scope.AddNode(
      "BatchNormInference", {x, gamma, beta, mean, variance},
      {{"channels_axis", options.channels_axis}, {"epsilon", options.epsilon}});
}

BatchNormLayer BatchNormalization(const Scope& scope, Output x, bool training,
                                  const BatchNormLayerOptions& options) {
  if (!scope.ok() || !x.valid()) return {};
  const float momentum = options.momentum;
  if (!(momentum >= 0.0f && momentum <= 1.0f)) {
    scope.UpdateStatus(absl::InvalidArgumentError(absl::StrCat(
        "BatchNormalization: momentum must be in [0, 1], got ", momentum)));
    return {};
  }
  absl::StatusOr<NormLayout> l =
      LayoutOf(x.shape(), options.norm.channels_axis);
  const int64_t c = l.ok() ? Channels(x.shape(), *l) : kUnknownDim;
  if (!l.ok() || c == kUnknownDim) {
    scope.UpdateStatus(absl::InvalidArgumentError(absl::StrCat(
        "BatchNormalization: ",
        l.ok() ? absl::StrCat("the channel count of x ",
                              x.shape().DebugString(), " must be known")
               : std::string(l.status().message()))));
    return {};
  }
  const TensorShape params({c});
  BatchNormLayer layer;
  layer.gamma =
      Variable(scope.WithOpName("gamma"), Fill(scope, params, 1.0, x.dtype()));
  layer.beta =
      Variable(scope.WithOpName("beta"), Fill(scope, params, 0.0, x.dtype()));
  VariableOptions frozen;
  frozen.trainable = false;
  layer.moving_mean =
      Variable(scope.WithOpName("moving_mean"),
               Fill(scope, params, 0.0, DType::kFloat32), frozen);
  layer.moving_variance =
      Variable(scope.WithOpName("moving_variance"),
               Fill(scope, params, 1.0, DType::kFloat32), frozen);
  if (!training) {
    layer.y = BatchNormInference(scope, x, layer.gamma.value, layer.beta.value,
                                 layer.moving_mean.value,
                                 layer.moving_variance.value, options.norm);
    return layer;
  }
  BatchNormOutputs bn =
      BatchNorm(scope, x, layer.gamma.value, layer.beta.value, options.norm);
  layer.y = bn.y;
  const Output keep = Const(scope, momentum);
  const Output take = Const(scope, 1.0f - momentum);
  auto update = [&](const VariableHandle& v, Output batch) {
    return Assign(
        scope, v.handle,
        Add(scope, Mul(scope, v.value, keep), Mul(scope, batch, take)));
  };
  layer.updates = {update(layer.moving_mean, bn.mean),
                   update(layer.moving_variance, bn.variance)};
  return layer;
}

}  // namespace ipuflow::ops
