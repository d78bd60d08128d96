#include "ops/nn/scaled_dot_product_attention.h"

#include <cmath>

#include "Eigen/Core"
#include "absl/strings/str_cat.h"
#include "core/op_registry.h"
#include "ops/math/float32_output.h"
#include "ops/math/half_io.h"

namespace ipuflow::ops {
namespace {

using RowMat =
    Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMat = Eigen::Map<const RowMat>;
using Mat = Eigen::Map<RowMat>;

struct Dims {
  int64_t batch = 1, s = 0, t = 0, d = 0, e = 0;
};

// Checks query [..., S, D], key [..., T, D], value [..., T, E] (unknown
// dims pass); `names` are the inputs' names for errors.
absl::StatusOr<Dims> AttentionDims(const TensorShape& q, const TensorShape& k,
                                   const TensorShape& v) {
  const int r = q.rank();
  if (r < 2 || k.rank() != r || v.rank() != r) {
    return absl::InvalidArgumentError(absl::StrCat(
        "query ", q.DebugString(), ", key ", k.DebugString(), " and value ",
        v.DebugString(), " must have one rank >= 2"));
  }
  auto differ = [](int64_t a, int64_t b) {
    return a != kUnknownDim && b != kUnknownDim && a != b;
  };
  bool bad =
      differ(q.dim(r - 1), k.dim(r - 1)) || differ(k.dim(r - 2), v.dim(r - 2));
  for (int i = 0; i < r - 2; ++i) {
    bad = bad || differ(q.dim(i), k.dim(i)) || differ(q.dim(i), v.dim(i));
  }
  if (bad) {
    return absl::InvalidArgumentError(absl::StrCat(
        "query ", q.DebugString(), ", key ", k.DebugString(), " and value ",
        v.DebugString(), " must be [..., S, D], [..., T, D] and [..., T, E]"));
  }
  Dims dims;
  dims.batch = q.DimProduct(0, r - 2);
  dims.s = q.dim(r - 2);
  dims.d = q.dim(r - 1);
  dims.t = k.dim(r - 2);
  dims.e = v.dim(r - 1);
  return dims;
}

TensorShape WithLast2(const TensorShape& like, int64_t a, int64_t b) {
  TensorShape out = like;
  out.set_dim(like.rank() - 2, a);
  out.set_dim(like.rank() - 1, b);
  return out;
}

float ScaleOf(float scale, int64_t d) {
  return scale != 0.0f ? scale : static_cast<float>(1.0 / std::sqrt(double(d)));
}

absl::Status CheckScale(float scale) {
  if (std::isfinite(scale)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("scale must be finite, got ", scale));
}

// Keys row i attends: all, or j <= i.
int64_t Keys(bool causal, int64_t i, int64_t t) {
  return causal ? std::min(t, i + 1) : t;
}

REGISTER_OP("ScaledDotProductAttention")
    .Input("query")
    .Input("key")
    .Input("value")
    .Attr("causal", false)
    .Attr("scale", 0.0f)
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      RETURN_IF_ERROR(c.ExpectFloat(0));
      RETURN_IF_ERROR(c.ExpectSameDType(0, 1));
      RETURN_IF_ERROR(c.ExpectSameDType(0, 2));
      ASSIGN_OR_RETURN(float scale, c.attr<float>("scale"));
      RETURN_IF_ERROR(CheckScale(scale));
      RETURN_IF_ERROR(c.attr<bool>("causal").status());
      const TensorShape &q = c.input_shape(0), &k = c.input_shape(1),
                        &v = c.input_shape(2);
      ASSIGN_OR_RETURN(Dims d, AttentionDims(q, k, v));
      c.set_output(0, c.input_dtype(0), WithLast2(q, d.s, d.e));
      c.set_output(1, DType::kFloat32, WithLast2(q, d.s, d.t));
      return absl::OkStatus();
    })
    .SetKernel([](KernelContext& ctx) -> absl::Status {
      absl::StatusOr<Dims> dims = AttentionDims(
          ctx.input(0).shape(), ctx.input(1).shape(), ctx.input(2).shape());
      if (!dims.ok()) return ctx.InvalidArgument(dims.status().message());
      const Dims d = *dims;
      const bool causal = ctx.attr<bool>("causal");
      const float scale = ScaleOf(ctx.attr<float>("scale"), d.d);
      const Tensor q32 = AsFloat32(ctx, ctx.input(0));
      const Tensor k32 = AsFloat32(ctx, ctx.input(1));
      const Tensor v32 = AsFloat32(ctx, ctx.input(2));
      const TensorShape& qs = ctx.input(0).shape();
      Float32Output out;
      RETURN_IF_ERROR(out.Allocate(ctx, 0, WithLast2(qs, d.s, d.e)));
      ASSIGN_OR_RETURN(Tensor * probs,
                       ctx.allocate_output(1, WithLast2(qs, d.s, d.t)));
      const float* q = q32.data<float>();
      const float* k = k32.data<float>();
      const float* v = v32.data<float>();
      float* o = out.data();
      float* p = probs->data<float>();
      const double cost = 2.0 * d.s * d.t * (d.d + d.e) + 20.0 * d.s * d.t;
      ctx.ParallelFor(d.batch, cost, [&](int64_t b0, int64_t b1) {
        for (int64_t b = b0; b < b1; ++b) {
          ConstMat qm(q + b * d.s * d.d, d.s, d.d);
          ConstMat km(k + b * d.t * d.d, d.t, d.d);
          ConstMat vm(v + b * d.t * d.e, d.t, d.e);
          Mat pm(p + b * d.s * d.t, d.s, d.t);
          pm.noalias() = (qm * km.transpose()) * scale;
          for (int64_t i = 0; i < d.s; ++i) {
            const int64_t n = Keys(causal, i, d.t);
            auto row = pm.row(i);
            if (n == 0) {
              row.setZero();
              continue;
            }
            const float m = row.head(n).maxCoeff();
            double sum = 0;
            for (int64_t j = 0; j < n; ++j) {
              row(j) = std::exp(row(j) - m);
              sum += row(j);
            }
            const float inv = static_cast<float>(1.0 / sum);
            row.head(n) *= inv;
            row.tail(d.t - n).setZero();
          }
          Mat(o + b * d.s * d.e, d.s, d.e).noalias() = pm * vm;
        }
      });
      out.Finish(ctx);
      return absl::OkStatus();
    })
    // O = P V, P = softmax(scale Q K^T + mask):
    //   dV = P^T dO;  dP = dO V^T;  dS = P * (dP - rowsum(dP * P));
    //   dQ = scale dS K;  dK = scale dS^T Q.
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      if (dy.size() > 1 && dy[1].valid()) {
        return absl::UnimplementedError(absl::StrCat(
            op.DebugName(),
            ": output 1 (the probabilities, for the gradient) is not "
            "differentiable; build the attention from BatchMatMul and "
            "Softmax to differentiate them"));
      }
      Node* n = s.AddNode("ScaledDotProductAttentionGrad",
                          {dy[0], op.input(0), op.input(1), op.input(2),
                           Output(const_cast<Node*>(&op), 1)},
                          {{"causal", op.attr<bool>("causal")},
                           {"scale", op.attr<float>("scale")}});
      if (n == nullptr) return s.status();
      *dx = {Output(n, 0), Output(n, 1), Output(n, 2)};
      return absl::OkStatus();
    });

REGISTER_OP("ScaledDotProductAttentionGrad")
    .Input("doutput")
    .Input("query")
    .Input("key")
    .Input("value")
    .Input("probs")
    .Attr("causal", false)
    .Attr("scale", 0.0f)
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      RETURN_IF_ERROR(c.ExpectFloat(1));
      for (int i : {0, 2, 3}) RETURN_IF_ERROR(c.ExpectSameDType(1, i));
      RETURN_IF_ERROR(c.ExpectDType(4, DType::kFloat32));
      ASSIGN_OR_RETURN(float scale, c.attr<float>("scale"));
      RETURN_IF_ERROR(CheckScale(scale));
      RETURN_IF_ERROR(
          AttentionDims(c.input_shape(1), c.input_shape(2), c.input_shape(3))
              .status());
      for (int i = 0; i < 3; ++i) {
        c.set_output(i, c.input_dtype(1 + i), c.input_shape(1 + i));
      }
      return absl::OkStatus();
    })
    .SetKernel([](KernelContext& ctx) -> absl::Status {
      absl::StatusOr<Dims> dims = AttentionDims(
          ctx.input(1).shape(), ctx.input(2).shape(), ctx.input(3).shape());
      if (!dims.ok()) return ctx.InvalidArgument(dims.status().message());
      const Dims d = *dims;
      const TensorShape& qs = ctx.input(1).shape();
      if (ctx.input(0).shape() != WithLast2(qs, d.s, d.e) ||
          ctx.input(4).shape() != WithLast2(qs, d.s, d.t)) {
        return ctx.InvalidArgument(
            "doutput ", ctx.input(0).shape().DebugString(), " and probs ",
            ctx.input(4).shape().DebugString(), " do not match query ",
            qs.DebugString(), " and key ", ctx.input(2).shape().DebugString());
      }
      const float scale = ScaleOf(ctx.attr<float>("scale"), d.d);
      const Tensor do32 = AsFloat32(ctx, ctx.input(0));
      const Tensor q32 = AsFloat32(ctx, ctx.input(1));
      const Tensor k32 = AsFloat32(ctx, ctx.input(2));
      const Tensor v32 = AsFloat32(ctx, ctx.input(3));
      Float32Output dq, dk, dv;
      RETURN_IF_ERROR(dq.Allocate(ctx, 0, qs));
      RETURN_IF_ERROR(dk.Allocate(ctx, 1, ctx.input(2).shape()));
      RETURN_IF_ERROR(dv.Allocate(ctx, 2, ctx.input(3).shape()));
      const float* g = do32.data<float>();
      const float* q = q32.data<float>();
      const float* k = k32.data<float>();
      const float* v = v32.data<float>();
      const float* p = ctx.input(4).data<float>();
      float *pdq = dq.data(), *pdk = dk.data(), *pdv = dv.data();
      const double cost = 4.0 * d.s * d.t * (d.d + d.e) + 10.0 * d.s * d.t;
      ctx.ParallelFor(d.batch, cost, [&](int64_t b0, int64_t b1) {
        RowMat ds(d.s, d.t);
        for (int64_t b = b0; b < b1; ++b) {
          ConstMat gm(g + b * d.s * d.e, d.s, d.e);
          ConstMat qm(q + b * d.s * d.d, d.s, d.d);
          ConstMat km(k + b * d.t * d.d, d.t, d.d);
          ConstMat vm(v + b * d.t * d.e, d.t, d.e);
          ConstMat pm(p + b * d.s * d.t, d.s, d.t);
          Mat(pdv + b * d.t * d.e, d.t, d.e).noalias() = pm.transpose() * gm;
          ds.noalias() = gm * vm.transpose();  // dP
          for (int64_t i = 0; i < d.s; ++i) {
            const float dot = ds.row(i).dot(pm.row(i));
            ds.row(i) =
                (pm.row(i).array() * (ds.row(i).array() - dot)).matrix();
          }
          Mat(pdq + b * d.s * d.d, d.s, d.d).noalias() = scale * (ds * km);
          Mat(pdk + b * d.t * d.d, d.t, d.d).noalias() =
              scale * (ds.transpose() * qm);
        }
      });
      dq.Finish(ctx);
      dk.Finish(ctx);
      dv.Finish(ctx);
      return absl::OkStatus();
    })
    .NotDifferentiable(
        "second-order gradients of attention are not implemented");

}  // namespace

AttentionOutputs ScaledDotProductAttention(const Scope& scope, Output query,
                                           Output key, Output value,
                                           const AttentionOptions& options) {
  Node* n =
      scope.AddNode("ScaledDotProductAttention", {query, key, value},
                    {{"causal", options.causal}, {"scale", options.scale}});
  if (n == nullptr) return {};
  return {Output(n, 0), Output(n, 1)};
}

}  // namespace ipuflow::ops
