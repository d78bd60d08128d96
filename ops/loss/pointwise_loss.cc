#include "ops/loss/pointwise_loss.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/op_registry.h"
#include "ops/loss/loss_util.h"
#include "ops/math/float32_output.h"
#include "ops/math/half_io.h"

namespace ipuflow::ops {
namespace {

enum class Kind { kMSE, kL1, kHuber, kBCE, kKL };

struct LossFn {
  Kind kind;
  double delta = 1, pos_weight = 1;
  bool log_target = false;

  // The loss of (x, t) and its derivatives, in float64.
  void operator()(double x, double t, double* l, double* dx, double* dt) const {
    switch (kind) {
      case Kind::kMSE: {
        const double d = x - t;
        *l = d * d;
        *dx = 2 * d;
        *dt = -2 * d;
        return;
      }
      case Kind::kL1: {
        const double d = x - t;
        *l = std::fabs(d);
        *dx = d > 0 ? 1 : (d < 0 ? -1 : 0);
        *dt = -*dx;
        return;
      }
      case Kind::kHuber: {
        const double d = x - t, a = std::fabs(d);
        *l = a <= delta ? 0.5 * d * d : delta * (a - 0.5 * delta);
        *dx = a <= delta ? d : (d > 0 ? delta : -delta);
        *dt = -*dx;
        return;
      }
      case Kind::kBCE: {
        // softplus(-x) = log(1 + e^-x), stable; sigmoid(-x) = 1 / (1 + e^x).
        const double sp =
            std::fmax(-x, 0.0) + std::log1p(std::exp(-std::fabs(x)));
        const double sig_neg =
            x >= 0 ? std::exp(-x) / (1 + std::exp(-x)) : 1 / (1 + std::exp(x));
        const double w = 1 + (pos_weight - 1) * t;
        *l = (1 - t) * x + w * sp;
        *dx = (1 - t) - w * sig_neg;
        *dt = -x + (pos_weight - 1) * sp;
        return;
      }
      case Kind::kKL: {
        if (log_target) {
          const double e = std::exp(t);
          *l = e * (t - x);
          *dx = -e;
          *dt = e * (t - x + 1);
        } else if (t > 0) {
          *l = t * (std::log(t) - x);
          *dx = -t;
          *dt = std::log(t) - x + 1;
        } else {
          *l = 0;
          *dx = 0;
          *dt = 0;
        }
        return;
      }
    }
  }
};

absl::StatusOr<LossFn> LossOf(const std::string& op, const AttrMap& attrs) {
  LossFn f{Kind::kMSE};
  if (op == "MSELoss") {
    f.kind = Kind::kMSE;
  } else if (op == "L1Loss") {
    f.kind = Kind::kL1;
  } else if (op == "HuberLoss") {
    f.kind = Kind::kHuber;
    ASSIGN_OR_RETURN(float delta, GetAttr<float>(attrs, "delta"));
    if (!(std::isfinite(delta) && delta > 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("delta must be finite and > 0, got ", delta));
    }
    f.delta = delta;
  } else if (op == "BCEWithLogitsLoss") {
    f.kind = Kind::kBCE;
    ASSIGN_OR_RETURN(float pw, GetAttr<float>(attrs, "pos_weight"));
    if (!(std::isfinite(pw) && pw >= 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("pos_weight must be finite and >= 0, got ", pw));
    }
    f.pos_weight = pw;
  } else if (op == "KLDivLoss") {
    f.kind = Kind::kKL;
    ASSIGN_OR_RETURN(f.log_target, GetAttr<bool>(attrs, "log_target"));
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown pointwise loss \"", op, "\""));
  }
  return f;
}

absl::Status CheckPair(ShapeContext& c, int a, int b) {
  RETURN_IF_ERROR(c.ExpectFloat(a));
  RETURN_IF_ERROR(c.ExpectSameDType(a, b));
  if (!c.input_shape(a).IsCompatibleWith(c.input_shape(b))) {
    return absl::InvalidArgumentError(absl::StrCat(
        c.InputName(a), " ", c.input_shape(a).DebugString(), " and ",
        c.InputName(b), " ", c.input_shape(b).DebugString(),
        " must have the same shape"));
  }
  return absl::OkStatus();
}

absl::Status SameShapes(const KernelContext& ctx, int a, int b) {
  if (ctx.input(a).shape() == ctx.input(b).shape()) return absl::OkStatus();
  return ctx.InvalidArgument(
      "inputs have shapes ", ctx.input(a).shape().DebugString(), " and ",
      ctx.input(b).shape().DebugString(), "; they must be equal");
}

absl::Status LossShape(ShapeContext& c) {
  RETURN_IF_ERROR(CheckPair(c, 0, 1));
  ASSIGN_OR_RETURN(std::string r, c.attr<std::string>("reduction"));
  ASSIGN_OR_RETURN(Reduction red, ParseReduction(r));
  RETURN_IF_ERROR(LossOf(c.op_name(), c.attrs()).status());
  if (red == Reduction::kBatchMean && c.input_shape(0).rank() == 0) {
    return absl::InvalidArgumentError(
        "reduction \"batchmean\" needs inputs of rank >= 1");
  }
  c.set_output(0, c.input_dtype(0), LossOutputShape(red, c.input_shape(0)));
  return absl::OkStatus();
}

absl::Status LossKernel(KernelContext& ctx) {
  RETURN_IF_ERROR(SameShapes(ctx, 0, 1));
  const LossFn f = *LossOf(ctx.node().op(), ctx.node().attrs());
  const Reduction red = *ParseReduction(ctx.attr<std::string>("reduction"));
  const Tensor x32 = AsFloat32(ctx, ctx.input(0));
  const Tensor t32 = AsFloat32(ctx, ctx.input(1));
  const float* x = x32.data<float>();
  const float* t = t32.data<float>();
  const TensorShape& shape = ctx.input(0).shape();
  const int64_t n = shape.num_elements();
  Float32Output out;
  RETURN_IF_ERROR(out.Allocate(ctx, 0, LossOutputShape(red, shape)));
  float* y = out.data();
  if (red == Reduction::kNone) {
    ctx.ParallelFor(n, 20, [&](int64_t b, int64_t e) {
      double l, dx, dt;
      for (int64_t i = b; i < e; ++i) {
        f(x[i], t[i], &l, &dx, &dt);
        y[i] = static_cast<float>(l);
      }
    });
  } else {
    const double sum = DeterministicSum(ctx, n, 20, [&](int64_t i) {
      double l, dx, dt;
      f(x[i], t[i], &l, &dx, &dt);
      return l;
    });
    y[0] = static_cast<float>(sum * ReductionScale(red, shape));
  }
  out.Finish(ctx);
  return absl::OkStatus();
}

AttrMap GradAttrs(const Node& op) {
  AttrMap a = op.attrs();
  a["loss"] = op.op();
  a.emplace("delta", 1.0f);
  a.emplace("pos_weight", 1.0f);
  a.emplace("log_target", false);
  return a;
}

// loss = reduce(f(x, t)): dx = g * df/dx, dt = g * df/dt, g the upstream
// gradient (per element for "none", else dy * the reduction's scale).
absl::Status LossGradient(const Scope& s, const Node& op,
                          absl::Span<const Output> dy,
                          std::vector<Output>* dx) {
  Node* n = s.AddNode("PointwiseLossGrad", {dy[0], op.input(0), op.input(1)},
                      GradAttrs(op));
  if (n == nullptr) return s.status();
  *dx = {Output(n, 0), Output(n, 1)};
  return absl::OkStatus();
}

void RegisterLoss(const char* name, AttrMap extra) {
  OpRegistration r = OpRegistry::Global()->Register(name);
  r.Input("input").Input("target").Attr("reduction", "mean");
  for (auto& [k, v] : extra) r.Attr(k, v);
  r.SetShapeFn(LossShape).SetKernel(LossKernel).SetGradient(LossGradient);
}

[[maybe_unused]] const bool kRegistered = [] {
  RegisterLoss("MSELoss", {});
  RegisterLoss("L1Loss", {});
  RegisterLoss("HuberLoss", {{"delta", 1.0f}});
  RegisterLoss("BCEWithLogitsLoss", {{"pos_weight", 1.0f}});
  RegisterLoss("KLDivLoss", {{"log_target", false}});
  return true;
}();

REGISTER_OP("PointwiseLossGrad")
    .Input("dy")
    .Input("input")
    .Input("target")
    .Attr("loss", "MSELoss")
    .Attr("reduction", "mean")
    .Attr("delta", 1.0f)
    .Attr("pos_weight", 1.0f)
    .Attr("log_target", false)
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      RETURN_IF_ERROR(CheckPair(c, 1, 2));
      RETURN_IF_ERROR(c.ExpectSameDType(0, 1));
      ASSIGN_OR_RETURN(std::string loss, c.attr<std::string>("loss"));
      RETURN_IF_ERROR(LossOf(loss, c.attrs()).status());
      ASSIGN_OR_RETURN(std::string r, c.attr<std::string>("reduction"));
      ASSIGN_OR_RETURN(Reduction red, ParseReduction(r));
      if (!c.input_shape(0).IsCompatibleWith(
              LossOutputShape(red, c.input_shape(1)))) {
        return absl::InvalidArgumentError(absl::StrCat(
            "dy has shape ", c.input_shape(0).DebugString(), ", expected ",
            LossOutputShape(red, c.input_shape(1)).DebugString()));
      }
      c.set_output(0, c.input_dtype(1), c.input_shape(1));
      c.set_output(1, c.input_dtype(2), c.input_shape(2));
      return absl::OkStatus();
    })
    .SetKernel([](KernelContext& ctx) -> absl::Status {
      RETURN_IF_ERROR(SameShapes(ctx, 1, 2));
      const LossFn f =
          *LossOf(ctx.attr<std::string>("loss"), ctx.node().attrs());
      const Reduction red = *ParseReduction(ctx.attr<std::string>("reduction"));
      const TensorShape& shape = ctx.input(1).shape();
      if (ctx.input(0).shape() != LossOutputShape(red, shape)) {
        return ctx.InvalidArgument("dy has shape ",
                                   ctx.input(0).shape().DebugString());
      }
      const Tensor g32 = AsFloat32(ctx, ctx.input(0));
      const Tensor x32 = AsFloat32(ctx, ctx.input(1));
      const Tensor t32 = AsFloat32(ctx, ctx.input(2));
      const float* g = g32.data<float>();
      const float* x = x32.data<float>();
      const float* t = t32.data<float>();
      const double scale = ReductionScale(red, shape);
      Float32Output dx_out, dt_out;
      RETURN_IF_ERROR(dx_out.Allocate(ctx, 0, shape));
      RETURN_IF_ERROR(dt_out.Allocate(ctx, 1, shape));
      float* pdx = dx_out.data();
      float* pdt = dt_out.data();
      const bool elementwise = red == Reduction::kNone;
      ctx.ParallelFor(shape.num_elements(), 20, [&](int64_t b, int64_t e) {
        double l, dx, dt;
        for (int64_t i = b; i < e; ++i) {
          f(x[i], t[i], &l, &dx, &dt);
          const double gi = elementwise ? g[i] : g[0] * scale;
          pdx[i] = static_cast<float>(gi * dx);
          pdt[i] = static_cast<float>(gi * dt);
        }
      });
      dx_out.Finish(ctx);
      dt_out.Finish(ctx);
      return absl::OkStatus();
    })
    .NotDifferentiable("second-order gradients of losses are not implemented");

Output AddLoss(const Scope& scope, const char* op, Output x, Output t,
               AttrMap attrs) {
  return scope.AddNode(op, {x, t}, std::move(attrs));
}

}  // namespace

Output MSELoss(const Scope& scope, Output input, Output target,
               const LossOptions& o) {
  return AddLoss(scope, "MSELoss", input, target, {{"reduction", o.reduction}});
}
Output L1Loss(const Scope& scope, Output input, Output target,
              const LossOptions& o) {
  return AddLoss(scope, "L1Loss", input, target, {{"reduction", o.reduction}});
}
Output HuberLoss(const Scope& scope, Output input, Output target,
                 const LossOptions& o) {
  return AddLoss(scope, "HuberLoss", input, target,
                 {{"reduction", o.reduction}, {"delta", o.delta}});
}
Output BCEWithLogitsLoss(const Scope& scope, Output logits, Output target,
                         const LossOptions& o) {
  return AddLoss(scope, "BCEWithLogitsLoss", logits, target,
                 {{"reduction", o.reduction}, {"pos_weight", o.pos_weight}});
}
Output KLDivLoss(const Scope& scope, Output log_input, Output target,
                 const LossOptions& o) {
  return AddLoss(scope, "KLDivLoss", log_input, target,
                 {{"reduction", o.reduction}, {"log_target", o.log_target}});
}

}  // namespace ipuflow::ops
