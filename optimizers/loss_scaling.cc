#include "optimizers/loss_scaling.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "ops/array/const.h"
#include "ops/array/identity.h"
#include "ops/collective/cross_replica.h"
#include "ops/control/loops.h"
#include "ops/math/add.h"
#include "ops/math/cast.h"
#include "ops/math/div.h"
#include "ops/math/equal.h"
#include "ops/math/greater.h"
#include "ops/math/less.h"
#include "ops/math/mul.h"
#include "ops/math/select.h"
#include "ops/math/sub.h"
#include "ops/state/assign.h"
#include "ops/state/gradient_statistics.h"
#include "ops/state/no_op.h"
#include "ops/state/read_variable.h"
#include "ops/state/variable.h"
#include "optimizers/gradient_accumulation.h"

namespace ipuflow::optimizers {
namespace {

constexpr float kHalfMax = 65504.f;

ops::VariableHandle StateVariable(const Scope& s, const std::string& name,
                                  Output initial) {
  return ops::Variable(s.WithOpName(name), initial,
                       {/*shared_name=*/"", /*trainable=*/false});
}

Output I32(const Scope& s, int v) { return ops::Const(s, v, DType::kInt32); }

}  // namespace

int LossScalingOptimizer::MicroBatches() const {
  const auto* ga =
      dynamic_cast<const GradientAccumulationOptimizer*>(optimizer_);
  return ga != nullptr ? ga->num_mini_batches() : 1;
}

Output LossScalingOptimizer::ReadScale(const Scope& scope) {
  if (graph_ != scope.graph()) {
    graph_ = scope.graph();
    state_scope_ = scope.NewSubScope("LossScaling");
  }
  const Scope& s = *state_scope_;
  if (scaling_.method == LossScalingMethod::kStatic) {
    return ops::Const(s.WithOpName("scale"), scaling_.loss_scaling);
  }
  if (!scale_handle_.valid() || scale_handle_.node->graph() != scope.graph()) {
    const float initial = scaling_.method == LossScalingMethod::kGradScaler
                              ? scaling_.grad_scaler.init_scale
                              : scaling_.loss_scaling;
    scale_handle_ =
        StateVariable(s, "scale",
                      ops::Const(s.WithOpName("scale/initial_value"), initial))
            .handle;
    if (!s.ok()) return Output();
    scale_name_ = ops::GetVariableInfo(scale_handle_)->name;
    const bool grad_scaler = scaling_.method == LossScalingMethod::kGradScaler;
    if (grad_scaler) {
      tracker_handle_ =
          StateVariable(s, "growth_tracker",
                        I32(s.WithOpName("growth_tracker/initial_value"), 0))
              .handle;
    }
    const int period = grad_scaler ? 1 : scaling_.automatic.update_period;
    if (MicroBatches() * period > 1) {
      counter_handle_ =
          StateVariable(s, "counter",
                        I32(s.WithOpName("counter/initial_value"), 0))
              .handle;
    }
    if (grad_scaler && MicroBatches() > 1) {
      found_handle_ =
          StateVariable(s, "found_inf",
                        ops::Const(s.WithOpName("found_inf/zero"), 0.f))
              .handle;
    } else if (!grad_scaler && MicroBatches() * period > 1) {
      lower_handle_ =
          StateVariable(s, "statistics/lower",
                        ops::Const(s.WithOpName("statistics/zero"), 0.f))
              .handle;
      upper_handle_ =
          StateVariable(s, "statistics/upper",
                        ops::Const(s.WithOpName("statistics/zero_1"), 0.f))
              .handle;
    }
  }
  return ops::ReadVariable(s.WithOpName("scale/value"), scale_handle_);
}

std::vector<GradAndVar> LossScalingOptimizer::ComputeGradients(
    const Scope& scope, Output loss, const VarList& var_list) {
  if (!scope.ok()) return {};
  if (absl::Status st = Validate(); !st.ok()) {
    scope.UpdateStatus(st);
    return {};
  }
  if (!loss.valid()) {
    // The base reports it.
    return Optimizer::ComputeGradients(scope, loss, var_list);
  }
  if (absl::Status st = CheckLossDType(loss); !st.ok()) {
    // Before the cast to float32 below would hide it.
    scope.UpdateStatus(absl::Status(
        st.code(), absl::StrCat(name(), " optimizer: ", st.message())));
    return {};
  }
  Output scale = ReadScale(scope);
  if (!scope.ok()) return {};
  const Scope& s = *state_scope_;
  // Scaled in float32: S = 2^16 is beyond float16's range, and the forward
  // value of the scaled loss need not fit float16. The backward pass enters
  // float16 at the loss's Cast, with S (then inf if S > 65504: GradScaler
  // backs off from it, as on a GPU).
  Output l = loss;
  if (l.dtype() != DType::kFloat32) {
    l = ops::Cast(s.WithOpName("loss"), l, DType::kFloat32);
  }
  Output scaled = ops::Mul(s.WithOpName("scaled_loss"), l, scale);
  if (!scope.ok()) return {};
  // The casts this backward pass makes from float16 gradients to float32.
  const std::vector<Node*>& casts =
      scope.graph()->collection(ops::kFloat16GradientCasts);
  const size_t before = casts.size();
  std::vector<GradAndVar> grads =
      Optimizer::ComputeGradients(scope, scaled, var_list);
  const std::vector<Node*>& after =
      scope.graph()->collection(ops::kFloat16GradientCasts);
  casts_graph_ = scope.graph();
  float16_casts_.assign(after.begin() + std::min(before, after.size()),
                        after.end());
  return grads;
}

Output LossScalingOptimizer::LossGradientSeed(const Scope& scope, Output loss) {
  if (absl::Status st = Validate(); !st.ok()) {
    scope.UpdateStatus(st);
    return Output();
  }
  Output scale = ReadScale(scope);
  if (!scope.ok() || scale.dtype() == loss.dtype()) return scale;
  return ops::Cast(state_scope_->WithOpName("seed"), scale, loss.dtype());
}

Output LossScalingOptimizer::Unscale(const Scope& scope, Output grad,
                                     const ops::VariableInfo& var,
                                     Output inverse) {
  const DType want = optimizer_->GradientDType(var);
  const std::string name = absl::StrCat(var.node->name(), "/unscale");
  const Scope s = scope.WithIpu(var.node->ipu());
  Output g = grad;
  if (g.dtype() != DType::kFloat32) {
    g = ops::Cast(s.WithOpName(name + "/float32"), g, DType::kFloat32);
  }
  g = ops::Mul(s.WithOpName(name), g, inverse);
  if (want != DType::kFloat32) {
    g = ops::Cast(s.WithOpName(name + "/cast"), g, want);
  }
  return g;
}

Output LossScalingOptimizer::AdvanceCounter(int m, Output* is_update,
                                            std::vector<Node*>* updates) {
  const Scope c = state_scope_->NewSubScope("counter");
  Output k = ops::ReadVariable(c.WithOpName("value"), counter_handle_);
  *is_update = ops::Equal(c.WithOpName("is_update"), k, I32(c, m - 1));
  updates->push_back(ops::Assign(
      c.WithOpName("advance"), counter_handle_,
      ops::Select(c.WithOpName("next"), *is_update, I32(c, 0),
                  ops::Add(c.WithOpName("plus_one"), k, I32(c, 1)))));
  return k;
}

std::vector<Node*> LossScalingOptimizer::AutomaticUpdate(
    const Scope& scope, const std::vector<GradAndVar>& scaled, Output scale) {
  const AutomaticLossScalingSettings& a = scaling_.automatic;
  const Scope& s = *state_scope_;
  const float edge = kHalfMax * a.bin_edge_location;
  Output lower, upper;
  for (const GradAndVar& gv : scaled) {
    // Tracked: the gradients of float16 variables (float16 themselves,
    // except a pipeline's float32-accumulated ones).
    if (!gv.grad.valid() || gv.variable == nullptr ||
        gv.variable->attr<DType>("dtype") != DType::kFloat16) {
      continue;
    }
    auto [lo, up] = ops::GradientHistogram(
        s.WithIpu(gv.variable->ipu())
            .WithOpName(absl::StrCat(gv.variable->name(), "/histogram")),
        gv.grad, edge);
    lower = lower.valid() ? ops::Add(s.WithOpName("lower_sum"), lower, lo) : lo;
    upper = upper.valid() ? ops::Add(s.WithOpName("upper_sum"), upper, up) : up;
  }
  if (!lower.valid()) {
    scope.UpdateStatus(absl::InvalidArgumentError(
        absl::StrCat(kAutomaticLossScaleError,
                     "No tracked gradient tensors of type fp16 were found.")));
    return {};
  }
  std::vector<Node*> updates;
  const int n = MicroBatches();
  const int m = n * a.update_period;
  Output is_update;  // Invalid: every step.
  if (m > 1) {
    // k counts micro-batches through [0, m); the last n of them (the last
    // optimizer step of the period) are collected.
    Output k = AdvanceCounter(m, &is_update, &updates);
    const Scope c = s.NewSubScope("counter");
    Output collect = ops::Cast(
        c.WithOpName("collect"),
        ops::Greater(c.WithOpName("in_last_step"), k, I32(c, m - n - 1)),
        DType::kFloat32);
    auto accumulate = [&](const char* name, Output handle, Output now) {
      const Scope t = s.NewSubScope(absl::StrCat("statistics/", name));
      Output total =
          ops::Add(t.WithOpName("total"),
                   ops::ReadVariable(t.WithOpName("value"), handle),
                   ops::Mul(t.WithOpName("collected"), now, collect));
      updates.push_back(ops::Assign(t.WithOpName("store"), handle,
                                    ops::Select(t.WithOpName("next"), is_update,
                                                ops::Const(t, 0.f), total)));
      return total;
    };
    lower = accumulate("lower", lower_handle_, lower);
    upper = accumulate("upper", upper_handle_, upper);
  }
  // Summed over replicas (identity on one), so every replica takes the same
  // decision and S stays replica-identical.
  lower = ops::CrossReplicaSum(s.WithOpName("lower_replicas"), lower);
  upper = ops::CrossReplicaSum(s.WithOpName("upper_replicas"), upper);
  const double t = a.threshold_upper_count_proportion;
  const float f = static_cast<float>(t / (1 - t));  // inf for t = 1.
  Output decrease = ops::Greater(
      s.WithOpName("decrease"), upper,
      ops::Mul(s.WithOpName("threshold"), ops::Const(s, f), lower));
  Output factor = ops::Select(s.WithOpName("factor"), decrease,
                              ops::Const(s, 0.5f), ops::Const(s, 2.f));
  Output next = ops::Mul(s.WithOpName("scale/next"), scale, factor);
  if (is_update.valid()) {
    next = ops::Select(s.WithOpName("scale/next_if_update"), is_update, next,
                       scale);
  }
  updates.push_back(
      ops::Assign(s.WithOpName("scale/update"), scale_handle_, next));
  return updates;
}

Node* LossScalingOptimizer::ApplyGradients(
    const Scope& scope, const std::vector<GradAndVar>& grads_and_vars) {
  if (!scope.ok()) return nullptr;
  if (absl::Status st = Validate(); !st.ok()) {
    scope.UpdateStatus(st);
    return nullptr;
  }
  Output scale = ReadScale(scope);
  if (!scope.ok()) return nullptr;
  const Scope s = *state_scope_;
  Output inverse =
      ops::Div(s.WithOpName("inverse_scale"), ops::Const(s, 1.f), scale);
  std::vector<GradAndVar> unscaled;
  for (const GradAndVar& gv : grads_and_vars) {
    if (!gv.grad.valid() || gv.variable == nullptr) {
      unscaled.push_back(gv);
      continue;
    }
    absl::StatusOr<ops::VariableInfo> var =
        ops::GetVariableInfo(Output(gv.variable));
    if (!var.ok()) {
      scope.UpdateStatus(var.status());
      return nullptr;
    }
    unscaled.push_back({Unscale(s, gv.grad, *var, inverse), gv.variable});
  }
  if (!scope.ok()) return nullptr;
  switch (scaling_.method) {
    case LossScalingMethod::kStatic:
      return optimizer_->ApplyGradients(scope, unscaled);
    case LossScalingMethod::kAutomatic: {
      std::vector<Node*> deps = AutomaticUpdate(scope, grads_and_vars, scale);
      if (!scope.ok()) return nullptr;
      Node* apply = optimizer_->ApplyGradients(scope, unscaled);
      if (apply == nullptr) return nullptr;
      deps.push_back(apply);
      return ops::Group(s.WithOpName("apply"), deps);
    }
    case LossScalingMethod::kGradScaler:
      return GradScalerApply(scope, grads_and_vars, unscaled, scale);
  }
  return nullptr;
}

Node* LossScalingOptimizer::GradScalerApply(
    const Scope& scope, const std::vector<GradAndVar>& scaled,
    const std::vector<GradAndVar>& unscaled, Output scale) {
  const Scope s = *state_scope_;
  // found_inf over every gradient and every replica.
  Output bad;
  for (const GradAndVar& gv : scaled) {
    if (!gv.grad.valid()) continue;
    Output c = ops::NonFiniteCount(
        s.WithIpu(gv.variable->ipu())
            .WithOpName(absl::StrCat(gv.variable->name(), "/non_finite")),
        gv.grad);
    bad = bad.valid() ? ops::Add(s.WithOpName("non_finite_sum"), bad, c) : c;
  }
  // A float32 gradient computed in float16 (a float32 weight cast to
  // float16, as autocast does) saturated at 65504 there with nanoo off,
  // where TF / PyTorch would have an inf; cast to float32 it is an ordinary
  // number. Counted at its cast, where it is still a float16 65504
  // (ops::kFloat16GradientCasts): the gradient's final dtype cannot tell.
  if (bad.valid() && casts_graph_ == scope.graph()) {
    for (Node* cast : float16_casts_) {
      Output c = ops::NonFiniteCount(
          s.WithIpu(cast->ipu())
              .WithOpName(absl::StrCat(cast->name(), "/non_finite")),
          cast->input(0));
      bad = ops::Add(s.WithOpName("non_finite_sum"), bad, c);
    }
  }
  if (!bad.valid()) {
    // The inner optimizer names the variables without a gradient.
    return optimizer_->ApplyGradients(scope, unscaled);
  }
  std::vector<Node*> deps;
  const int n = MicroBatches();
  Output is_update;  // Invalid: every step is a weight update.
  if (n > 1) {
    // Over the N micro-batches of a weight update: k counts them, and the
    // non-finite counts add up until the update.
    AdvanceCounter(n, &is_update, &deps);
    bad = ops::Add(
        s.WithOpName("found_inf/total"),
        ops::ReadVariable(s.WithOpName("found_inf/value"), found_handle_), bad);
    deps.push_back(
        ops::Assign(s.WithOpName("found_inf/store"), found_handle_,
                    ops::Select(s.WithOpName("found_inf/next"), is_update,
                                ops::Const(s, 0.f), bad)));
  }
  bad = ops::CrossReplicaSum(s.WithOpName("non_finite_replicas"), bad);
  Output finite = ops::Equal(s.WithOpName("finite"), bad, ops::Const(s, 0.f));
  if (auto* ga = dynamic_cast<GradientAccumulationOptimizer*>(optimizer_)) {
    // The accumulation wrapper's own conditional update, gated: on the N-th
    // micro-batch it applies when finite, else empties its accumulators.
    const Scope gs = s.NewSubScope("gate");
    Output upd = is_update.valid() ? ops::Cast(gs.WithOpName("update"),
                                               is_update, DType::kFloat32)
                                   : ops::Const(gs.WithOpName("update"), 1.f);
    Output fin = ops::Cast(gs.WithOpName("finite"), finite, DType::kFloat32);
    Output one = ops::Const(gs, 1.f);
    GradientAccumulationOptimizer::ApplyGate gate;
    gate.apply_now =
        ops::Equal(gs.WithOpName("apply_now"), ops::Mul(gs, upd, fin), one);
    gate.skip_now = ops::Equal(gs.WithOpName("skip_now"),
                               ops::Mul(gs, upd, ops::Sub(gs, one, fin)), one);
    ga->SetApplyGate(gate);
    Node* apply = ga->ApplyGradients(scope, unscaled);
    ga->SetApplyGate({});
    if (apply == nullptr) return nullptr;
    deps.push_back(apply);
  } else {
    // The inner update runs at most once, when every gradient is finite.
    auto body = [&](const Scope&, const std::vector<Output>& args) {
      optimizer_->ApplyGradients(scope, unscaled);
      return args;
    };
    auto cond = [](const Scope& c, const std::vector<Output>& args) {
      return ops::Identity(c, args[0]);
    };
    absl::StatusOr<loops::Loop> loop =
        loops::WhileLoop(s.WithOpName("apply_if_finite"), cond, body, {finite},
                         /*infeed=*/nullptr, /*maximum_iterations=*/1);
    if (!loop.ok()) {
      scope.UpdateStatus(loop.status());
      return nullptr;
    }
    deps.push_back(loop->op);
  }
  const GradScalerSettings& g = scaling_.grad_scaler;
  const Scope u = s.NewSubScope("update");
  Output tracker = ops::ReadVariable(u.WithOpName("tracker"), tracker_handle_);
  Output plus_one =
      ops::Add(u.WithOpName("tracker_plus_one"), tracker, I32(u, 1));
  Output grow =
      ops::Equal(u.WithOpName("grow"), plus_one, I32(u, g.growth_interval));
  Output next_tracker = ops::Select(
      u.WithOpName("next_tracker"), finite,
      ops::Select(u.WithOpName("grown_tracker"), grow, I32(u, 0), plus_one),
      I32(u, 0));
  Output next_scale =
      ops::Select(u.WithOpName("next_scale"), finite,
                  ops::Select(u.WithOpName("grown_scale"), grow,
                              ops::Mul(u.WithOpName("grown"), scale,
                                       ops::Const(u, g.growth_factor)),
                              scale),
                  ops::Mul(u.WithOpName("backed_off"), scale,
                           ops::Const(u, g.backoff_factor)));
  if (is_update.valid()) {  // Unchanged between weight updates.
    next_tracker = ops::Select(u.WithOpName("tracker_if_update"), is_update,
                               next_tracker, tracker);
    next_scale = ops::Select(u.WithOpName("scale_if_update"), is_update,
                             next_scale, scale);
  }
  deps.push_back(ops::Assign(u.WithOpName("store_tracker"), tracker_handle_,
                             next_tracker));
  deps.push_back(
      ops::Assign(u.WithOpName("store_scale"), scale_handle_, next_scale));
  if (!scope.ok()) return nullptr;
  return ops::Group(s.WithOpName("apply"), deps);
}

Node* LossScalingOptimizer::ApplyDense(const Scope& scope, Output,
                                       const ops::VariableInfo& var,
                                       const std::vector<Output>&) {
  scope.UpdateStatus(absl::InternalError(
      absl::StrCat("LossScaling optimizer: ApplyDense called for '", var.name,
                   "' (the wrapper applies through its inner optimizer)")));
  return nullptr;
}

}  // namespace ipuflow::optimizers
