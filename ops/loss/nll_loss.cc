#include "ops/loss/nll_loss.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "core/op_registry.h"
#include "ops/loss/loss_util.h"
#include "ops/math/float32_output.h"
#include "ops/math/half_io.h"

namespace ipuflow::ops {
namespace {

absl::StatusOr<Reduction> NllReduction(const std::string& name) {
  ASSIGN_OR_RETURN(Reduction r, ParseReduction(name));
  if (r == Reduction::kBatchMean) {
    return absl::InvalidArgumentError(
        "reduction must be \"none\", \"sum\" or \"mean\", got \"batchmean\"");
  }
  return r;
}

// Checks log_probs [N, C], labels [N] int, weights [C] (from `first`).
absl::Status CheckInputs(ShapeContext& c, int first) {
  const int lp = first, lab = first + 1, w = first + 2;
  RETURN_IF_ERROR(c.ExpectFloat(lp));
  RETURN_IF_ERROR(c.ExpectRank(lp, 2));
  RETURN_IF_ERROR(c.ExpectRank(lab, 1));
  RETURN_IF_ERROR(c.ExpectRank(w, 1));
  RETURN_IF_ERROR(c.ExpectSameDType(lp, w));
  if (c.input_dtype(lab) != DType::kInt32 &&
      c.input_dtype(lab) != DType::kInt64) {
    return absl::InvalidArgumentError(
        absl::StrCat("input 'labels' must be int32 or int64, got ",
                     DTypeName(c.input_dtype(lab))));
  }
  const TensorShape& x = c.input_shape(lp);
  if (!TensorShape({x.dim(0)}).IsCompatibleWith(c.input_shape(lab)) ||
      !TensorShape({x.dim(1)}).IsCompatibleWith(c.input_shape(w))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "log_probs ", x.DebugString(), ", labels ",
        c.input_shape(lab).DebugString(), " and weights ",
        c.input_shape(w).DebugString(), " must be [N, C], [N] and [C]"));
  }
  return absl::OkStatus();
}

// Each row's class, or -1 if ignored; InvalidArgument for a bad label.
template <typename L>
absl::Status RowClasses(const KernelContext& ctx, const Tensor& labels,
                        int64_t classes, int64_t ignore,
                        std::vector<int64_t>* out) {
  const L* p = labels.data<L>();
  out->resize(labels.NumElements());
  for (int64_t i = 0; i < labels.NumElements(); ++i) {
    const int64_t y = static_cast<int64_t>(p[i]);
    if (y == ignore) {
      (*out)[i] = -1;
    } else if (y < 0 || y >= classes) {
      return ctx.InvalidArgument("label ", y, " at row ", i,
                                 " is out of range [0, ", classes,
                                 ") and is not ignore_index ", ignore);
    } else {
      (*out)[i] = y;
    }
  }
  return absl::OkStatus();
}

struct Prepared {
  std::vector<int64_t> classes;
  Tensor log_probs, weights;  // float32.
  double weight_sum = 0;      // Of the rows not ignored.
};

absl::StatusOr<Prepared> Prepare(const KernelContext& ctx, int first) {
  const Tensor& lp = ctx.input(first);
  const Tensor& labels = ctx.input(first + 1);
  const Tensor& w = ctx.input(first + 2);
  if (labels.dim(0) != lp.dim(0) || w.dim(0) != lp.dim(1)) {
    return ctx.InvalidArgument("log_probs ", lp.shape().DebugString(),
                               ", labels ", labels.shape().DebugString(),
                               " and weights ", w.shape().DebugString(),
                               " must be [N, C], [N] and [C]");
  }
  Prepared p;
  const int64_t ignore = ctx.attr<int64_t>("ignore_index");
  if (labels.dtype() == DType::kInt32) {
    RETURN_IF_ERROR(
        RowClasses<int32_t>(ctx, labels, lp.dim(1), ignore, &p.classes));
  } else {
    RETURN_IF_ERROR(
        RowClasses<int64_t>(ctx, labels, lp.dim(1), ignore, &p.classes));
  }
  p.log_probs = AsFloat32(ctx, lp);
  p.weights = AsFloat32(ctx, w);
  const float* pw = p.weights.data<float>();
  for (int64_t y : p.classes) {
    if (y >= 0) p.weight_sum += pw[y];
  }
  return p;
}

REGISTER_OP("NLLLoss")
    .Input("log_probs")
    .Input("labels")
    .Input("weights")
    .Attr("ignore_index", int64_t{-100})
    .Attr("reduction", "mean")
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      RETURN_IF_ERROR(CheckInputs(c, 0));
      ASSIGN_OR_RETURN(std::string r, c.attr<std::string>("reduction"));
      ASSIGN_OR_RETURN(Reduction red, NllReduction(r));
      RETURN_IF_ERROR(c.attr<int64_t>("ignore_index").status());
      c.set_output(
          0, c.input_dtype(0),
          LossOutputShape(red, TensorShape({c.input_shape(0).dim(0)})));
      return absl::OkStatus();
    })
    .SetKernel([](KernelContext& ctx) -> absl::Status {
      ASSIGN_OR_RETURN(Prepared p, Prepare(ctx, 0));
      const Reduction red = *NllReduction(ctx.attr<std::string>("reduction"));
      const int64_t n = ctx.input(0).dim(0), c = ctx.input(0).dim(1);
      const float* lp = p.log_probs.data<float>();
      const float* w = p.weights.data<float>();
      auto row = [&](int64_t i) -> double {
        const int64_t y = p.classes[i];
        return y < 0 ? 0.0 : -double{w[y]} * lp[i * c + y];
      };
      Float32Output out;
      RETURN_IF_ERROR(
          out.Allocate(ctx, 0, LossOutputShape(red, TensorShape({n}))));
      if (red == Reduction::kNone) {
        for (int64_t i = 0; i < n; ++i) out.data()[i] = row(i);
      } else {
        double sum = 0;
        for (int64_t i = 0; i < n; ++i) sum += row(i);
        if (red == Reduction::kMean) sum /= p.weight_sum;
        out.data()[0] = static_cast<float>(sum);
      }
      out.Finish(ctx);
      return absl::OkStatus();
    })
    // loss_i = -w[y_i] x[i, y_i]:  dx[i, y_i] = -w[y_i] g_i, g_i = dy_i
    // ("none"), dy ("sum") or dy / sum(w) ("mean"); labels and weights are
    // not differentiated.
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      Node* n = s.AddNode("NLLLossGrad",
                          {dy[0], op.input(0), op.input(1), op.input(2)},
                          {{"ignore_index", op.attr<int64_t>("ignore_index")},
                           {"reduction", op.attr<std::string>("reduction")}});
      if (n == nullptr) return s.status();
      *dx = {Output(n, 0), Output(), Output()};
      return absl::OkStatus();
    });

REGISTER_OP("NLLLossGrad")
    .Input("dy")
    .Input("log_probs")
    .Input("labels")
    .Input("weights")
    .Attr("ignore_index", int64_t{-100})
    .Attr("reduction", "mean")
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      RETURN_IF_ERROR(CheckInputs(c, 1));
      RETURN_IF_ERROR(c.ExpectSameDType(0, 1));
      ASSIGN_OR_RETURN(std::string r, c.attr<std::string>("reduction"));
      RETURN_IF_ERROR(NllReduction(r).status());
      c.set_output(0, c.input_dtype(1), c.input_shape(1));
      return absl::OkStatus();
    })
    .SetKernel([](KernelContext& ctx) -> absl::Status {
      ASSIGN_OR_RETURN(Prepared p, Prepare(ctx, 1));
      const Reduction red = *NllReduction(ctx.attr<std::string>("reduction"));
      const int64_t n = ctx.input(1).dim(0), c = ctx.input(1).dim(1);
      const TensorShape want = LossOutputShape(red, TensorShape({n}));
      if (ctx.input(0).shape() != want) {
        return ctx.InvalidArgument("dy has shape ",
                                   ctx.input(0).shape().DebugString(),
                                   ", expected ", want.DebugString());
      }
      const Tensor g32 = AsFloat32(ctx, ctx.input(0));
      const float* g = g32.data<float>();
      const float* w = p.weights.data<float>();
      Float32Output out;
      RETURN_IF_ERROR(out.Allocate(ctx, 0, ctx.input(1).shape()));
      float* dx = out.data();
      std::fill_n(dx, n * c, 0.0f);
      const double scale = red == Reduction::kMean ? 1.0 / p.weight_sum : 1.0;
      for (int64_t i = 0; i < n; ++i) {
        const int64_t y = p.classes[i];
        if (y < 0) continue;
        const double gi = red == Reduction::kNone ? g[i] : g[0] * scale;
        dx[i * c + y] = static_cast<float>(-double{w[y]} * gi);
      }
      out.Finish(ctx);
      return absl::OkStatus();
    })
    .NotDifferentiable("second-order gradients of losses are not implemented");

}  // namespace

Output NLLLoss(const Scope& scope, Output log_probs, Output labels,
               Output weights, const NLLLossOptions& options) {
  return scope.AddNode("NLLLoss", {log_probs, labels, weights},
                       {{"ignore_index", options.ignore_index},
                        {"reduction", options.reduction}});
}

}  // namespace ipuflow::ops
