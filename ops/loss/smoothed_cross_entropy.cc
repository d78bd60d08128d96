#include "ops/loss/smoothed_cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/op_registry.h"
#include "ops/math/float32_output.h"
#include "ops/math/half_io.h"

namespace ipuflow::ops {
namespace {

absl::Status CheckSmoothing(float e) {
  if (e >= 0.0f && e <= 1.0f) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("label_smoothing must be in [0, 1], got ", e));
}

absl::Status CheckSmoothedInputs(ShapeContext& c, int first) {
  RETURN_IF_ERROR(c.ExpectFloat(first));
  RETURN_IF_ERROR(c.ExpectRank(first, 2));
  RETURN_IF_ERROR(c.ExpectRank(first + 1, 1));
  const DType l = c.input_dtype(first + 1);
  if (l != DType::kInt32 && l != DType::kInt64) {
    return absl::InvalidArgumentError(absl::StrCat(
        "input 'labels' must be int32 or int64, got ", DTypeName(l)));
  }
  if (!TensorShape({c.input_shape(first).dim(0)})
           .IsCompatibleWith(c.input_shape(first + 1))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "logits ", c.input_shape(first).DebugString(), " and labels ",
        c.input_shape(first + 1).DebugString(), " must be [N, C] and [N]"));
  }
  ASSIGN_OR_RETURN(float e, c.attr<float>("label_smoothing"));
  return CheckSmoothing(e);
}

absl::StatusOr<std::vector<int64_t>> Labels(const KernelContext& ctx,
                                            const Tensor& logits,
                                            const Tensor& labels) {
  if (labels.dim(0) != logits.dim(0)) {
    return ctx.InvalidArgument("logits ", logits.shape().DebugString(),
                               " and labels ", labels.shape().DebugString(),
                               " must be [N, C] and [N]");
  }
  std::vector<int64_t> out(labels.NumElements());
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = labels.dtype() == DType::kInt32 ? labels.data<int32_t>()[i]
                                             : labels.data<int64_t>()[i];
    if (out[i] < 0 || out[i] >= logits.dim(1)) {
      return ctx.InvalidArgument("label ", out[i], " at row ", i,
                                 " is out of range [0, ", logits.dim(1), ")");
    }
  }
  return out;
}

// One row: returns the loss; writes softmax(x) - q into `grad` if not null.
double Row(const float* x, int64_t c, int64_t label, double e, float* grad) {
  double m = x[0];
  for (int64_t j = 1; j < c; ++j) m = std::max<double>(m, x[j]);
  double s = 0, sum_x = 0;
  for (int64_t j = 0; j < c; ++j) {
    s += std::exp(x[j] - m);
    sum_x += x[j] - m;
  }
  const double lse = std::log(s);
  if (grad != nullptr) {
    for (int64_t j = 0; j < c; ++j) {
      const double q = (j == label ? 1 - e : 0) + e / c;
      grad[j] = static_cast<float>(std::exp(x[j] - m) / s - q);
    }
  }
  // logsumexp - sum q x, shifted by m (sum q = 1).
  return lse - (1 - e) * (x[label] - m) - e / c * sum_x;
}

REGISTER_OP("SmoothedSparseSoftmaxCrossEntropy")
    .Input("logits")
    .Input("labels")
    .Attr("label_smoothing", 0.0f)
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      RETURN_IF_ERROR(CheckSmoothedInputs(c, 0));
      c.set_output(0, c.input_dtype(0), TensorShape({c.input_shape(0).dim(0)}));
      return absl::OkStatus();
    })
    .SetKernel([](KernelContext& ctx) -> absl::Status {
      const Tensor& logits = ctx.input(0);
      ASSIGN_OR_RETURN(std::vector<int64_t> y,
                       Labels(ctx, logits, ctx.input(1)));
      const int64_t n = logits.dim(0), c = logits.dim(1);
      const double e = ctx.attr<float>("label_smoothing");
      const Tensor x32 = AsFloat32(ctx, logits);
      const float* x = x32.data<float>();
      Float32Output out;
      RETURN_IF_ERROR(out.Allocate(ctx, 0, TensorShape({n})));
      float* loss = out.data();
      ctx.ParallelFor(n, 25.0 * c, [&](int64_t b, int64_t end) {
        for (int64_t i = b; i < end; ++i) {
          loss[i] = static_cast<float>(Row(x + i * c, c, y[i], e, nullptr));
        }
      });
      out.Finish(ctx);
      return absl::OkStatus();
    })
    // dx_i = (softmax(x_i) - q_i) dy_i (SmoothedSparseSoftmaxCrossEntropyGrad).
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      Node* n =
          s.AddNode("SmoothedSparseSoftmaxCrossEntropyGrad",
                    {dy[0], op.input(0), op.input(1)},
                    {{"label_smoothing", op.attr<float>("label_smoothing")}});
      if (n == nullptr) return s.status();
      *dx = {Output(n, 0), Output()};
      return absl::OkStatus();
    });

REGISTER_OP("SmoothedSparseSoftmaxCrossEntropyGrad")
    .Input("dy")
    .Input("logits")
    .Input("labels")
    .Attr("label_smoothing", 0.0f)
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      RETURN_IF_ERROR(CheckSmoothedInputs(c, 1));
      RETURN_IF_ERROR(c.ExpectSameDType(0, 1));
      RETURN_IF_ERROR(c.ExpectRank(0, 1));
      c.set_output(0, c.input_dtype(1), c.input_shape(1));
      return absl::OkStatus();
    })
    .SetKernel([](KernelContext& ctx) -> absl::Status {
      const Tensor& logits = ctx.input(1);
      ASSIGN_OR_RETURN(std::vector<int64_t> y,
                       Labels(ctx, logits, ctx.input(2)));
      if (ctx.input(0).shape() != TensorShape({logits.dim(0)})) {
        return ctx.InvalidArgument("dy has shape ",
                                   ctx.input(0).shape().DebugString(),
                                   ", expected [", logits.dim(0), "]");
      }
      const int64_t n = logits.dim(0), c = logits.dim(1);
      const double e = ctx.attr<float>("label_smoothing");
      const Tensor x32 = AsFloat32(ctx, logits);
      const Tensor g32 = AsFloat32(ctx, ctx.input(0));
      const float* x = x32.data<float>();
      const float* g = g32.data<float>();
      Float32Output out;
      RETURN_IF_ERROR(out.Allocate(ctx, 0, logits.shape()));
      float* dx = out.data();
      ctx.ParallelFor(n, 30.0 * c, [&](int64_t b, int64_t end) {
        for (int64_t i = b; i < end; ++i) {
          Row(x + i * c, c, y[i], e, dx + i * c);
          for (int64_t j = 0; j < c; ++j) dx[i * c + j] *= g[i];
        }
      });
      out.Finish(ctx);
      return absl::OkStatus();
    })
    .NotDifferentiable("second-order gradients of losses are not implemented");

}  // namespace

Output SmoothedSparseSoftmaxCrossEntropy(const Scope& scope, Output logits,
                                         Output labels, float label_smoothing) {
  return scope.AddNode("SmoothedSparseSoftmaxCrossEntropy", {logits, labels},
                       {{"label_smoothing", label_smoothing}});
}

}  // namespace ipuflow::ops
