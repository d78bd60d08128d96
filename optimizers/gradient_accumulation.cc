#include "optimizers/gradient_accumulation.h"

#include "absl/strings/str_cat.h"
#include "core/graph_collections.h"
#include "ops/array/const.h"
#include "ops/array/identity.h"
#include "ops/collective/sharded_update.h"
#include "ops/control/loops.h"
#include "ops/math/add.h"
#include "ops/math/cast.h"
#include "ops/math/div.h"
#include "ops/math/equal.h"
#include "ops/math/minimum.h"
#include "ops/math/mul.h"
#include "ops/math/select.h"
#include "ops/state/assign.h"
#include "ops/state/assign_add_scaled.h"
#include "ops/state/assign_zeros.h"
#include "ops/state/handle.h"
#include "ops/state/initializers.h"
#include "ops/state/no_op.h"
#include "ops/state/read_variable.h"
#include "ops/state/variable.h"
#include "optimizers/offloaded_state.h"

namespace ipuflow::optimizers {
namespace {

using Method = GradientAccumulationReductionMethod;

// `x` as `dtype`; no node when it already is.
Output CastTo(const Scope& scope, Output x, DType dtype) {
  return x.dtype() == dtype ? x : ops::Cast(scope, x, dtype);
}

}  // namespace

absl::Status GradientAccumulationOptimizer::Validate() const {
  const std::string where = absl::StrCat(name(), " optimizer: ");
  if (optimizer_ == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, "the optimizer to wrap is null"));
  }
  if (optimizer_->accumulates_gradients()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, "the wrapped optimizer '", optimizer_->name(),
                     "' already accumulates gradients; use one wrapper whose "
                     "num_mini_batches is the product"));
  }
  if (num_mini_batches_ < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        where,
        "num_mini_batches (the mini-batches accumulated per weight "
        "update) must be >= 1, got ",
        num_mini_batches_));
  }
  if (dtype_.fixed().has_value() && !IsFloating(*dtype_.fixed())) {
    return absl::InvalidArgumentError(
        absl::StrCat(where,
                     "the accumulation dtype must be float32 or "
                     "float16, got ",
                     DTypeName(*dtype_.fixed())));
  }
  if (weight_update_.replicated_optimizer_state_sharding &&
      weight_update_.offload_weight_update_variables == false) {
    // The original's ValueError (ops/op_util.py create_resource_update).
    return absl::InvalidArgumentError(absl::StrCat(
        where,
        "To use replicated_optimizer_state_sharding, optimizer state must be "
        "offloaded by using offload_weight_update_variables."));
  }
  return absl::OkStatus();
}

std::vector<std::string> GradientAccumulationOptimizer::SlotNames() const {
  if (!dtype_.is_default()) return {};
  return {"accumulator"};
}

std::vector<Node*> GradientAccumulationOptimizer::Prepare(const Scope& scope) {
  if (absl::Status s = Validate(); !s.ok()) {
    scope.UpdateStatus(s);
    return {};
  }
  // n cycles through [0, N): no modulo op needed, and it never overflows.
  ops::VariableHandle counter = ops::Variable(
      scope.WithOpName("counter"),
      ops::Const(scope.WithOpName("counter/initial_value"), 0, DType::kInt32),
      {/*shared_name=*/"", /*trainable=*/false});
  if (counter.handle.node != nullptr) {
    scope.graph()->AddToCollection(kAccumulationCountersCollection,
                                   counter.handle.node);
  }
  const Output n = counter.value;  // Read before the advance built below.
  is_last_ = ops::Equal(scope.WithOpName("is_last"), n,
                        ops::Const(scope.WithOpName("counter/last"),
                                   num_mini_batches_ - 1, DType::kInt32));
  Output next = ops::Select(
      scope.WithOpName("counter/next"), is_last_,
      ops::Const(scope.WithOpName("counter/zero"), 0, DType::kInt32),
      ops::Add(scope.WithOpName("counter/plus_one"), n,
               ops::Const(scope.WithOpName("counter/one"), 1, DType::kInt32)));
  Node* advance =
      ops::Assign(scope.WithOpName("counter/advance"), counter.handle, next);
  remote_ = nullptr;
  if (weight_update_.offload_weight_update_variables != false) {
    RemoteStateOptions o;
    o.offload_weight_update_variables =
        weight_update_.offload_weight_update_variables;
    o.replicated_optimizer_state_sharding =
        weight_update_.replicated_optimizer_state_sharding;
    o.replica_identical =
        dynamic_cast<const CrossReplicaOptimizer*>(optimizer_) != nullptr;
    remote_ = std::make_shared<RemoteState>(
        absl::StrCat(name(), " optimizer '", scope.prefix(), "'"), o);
    remote_id_ = scope.graph()->UniqueName(
        absl::StrCat(scope.prefix(), "/offloaded_state"));
    remote_states_.push_back(remote_);
    next_update_ = 0;
  }
  step_scales_ = MakeMicroBatchScales(scope, reduction_method_, n,
                                      /*first_overwrites=*/false);
  return {advance};
}

Node* GradientAccumulationOptimizer::ApplyDense(
    const Scope& scope, Output grad, const ops::VariableInfo& var,
    const std::vector<Output>& slots) {
  if (!scope.ok()) return nullptr;
  const Scope s = scope.NewSubScope(var.node->name());
  const DType dtype = dtype_.For(var);
  if (!IsFloating(dtype)) {
    scope.UpdateStatus(absl::InvalidArgumentError(absl::StrCat(
        name(), " optimizer: the accumulation dtype of '", var.name,
        "' must be float32 or float16, got ", DTypeName(dtype))));
    return nullptr;
  }
  Output acc;
  if (!slots.empty()) {
    acc = slots[0];
  } else {
    Output zeros =
        ops::Zeros(s.WithOpName("accumulator/Zeros"), var.shape, dtype);
    acc = ops::Variable(s.WithOpName("accumulator"), zeros,
                        {/*shared_name=*/"", /*trainable=*/false})
              .handle;
  }
  // The memory report counts it as a gradient accumulator (never
  // offloaded: every step writes it).
  if (ops::IsVariable(acc.node)) {
    scope.graph()->AddToCollection(kGradientAccumulatorsCollection, acc.node);
  }
  Node* accumulate = Accumulate(s, acc, dtype, grad);
  if (!s.ok()) return nullptr;
  // The accumulated value is complete once `accumulate` has run.
  Output apply_now = ops::Identity(
      s.WithOpName("apply_now").WithControlDependencies({accumulate}),
      gate_.apply_now.valid() ? gate_.apply_now : is_last_);
  // Offloading: the state comes in before the update, by data.
  const int update = next_update_++;
  Output shard;  // ZeRO-1: the chunk this replica updates.
  if (remote_ != nullptr) {
    apply_now = OffloadedStateLoad(s.WithOpName("offload/load"), remote_id_,
                                   remote_, update, apply_now);
    if (weight_update_.replicated_optimizer_state_sharding &&
        optimizer_->UpdatesElementwise()) {
      shard = Output(apply_now.node, 1);
      remote_->ShardUpdate(update, var.shape.num_elements());
    }
  }
  const int first_new = scope.graph()->num_nodes();
  // The inner optimizer builds in the wrapper's scope, so its slots are
  // named as without the wrapper, under it: "GradientAccumulation/w/Adam/m".
  Node* apply = ApplyIf(s.WithNoControlDependencies(),
                        scope.NewSubScope("").WithNoControlDependencies(),
                        apply_now, acc, dtype, var, shard);
  if (remote_ != nullptr && apply != nullptr) {
    // The variables the inner update created are used by it only: its
    // state (the weights and accumulators exist already).
    for (int i = first_new; i < scope.graph()->num_nodes(); ++i) {
      const Node* n = scope.graph()->node(i);
      if (!ops::IsVariable(n)) continue;
      absl::StatusOr<ops::VariableInfo> info =
          ops::GetVariableInfo(Output(const_cast<Node*>(n)));
      if (!info.ok()) {
        scope.UpdateStatus(info.status());
        return nullptr;
      }
      remote_->AddVariable(update, n, info->name);
    }
    // ... and goes out after it (the loop's flag: whether it ran).
    apply = OffloadedStateStore(s.WithOpName("offload/store"), remote_id_,
                                remote_, update, Output(apply, 0))
                .node;
  }
  if (!gate_.skip_now.valid() || apply == nullptr) return apply;
  // A skipped update still empties the accumulator (it may hold inf or NaN:
  // a conditional reset, as 0 * inf would be NaN).
  Output skip_now = ops::Identity(
      s.WithOpName("skip_now").WithControlDependencies({accumulate}),
      gate_.skip_now);
  auto body = [&](const Scope&, const std::vector<Output>& args) {
    ops::AssignZeros(s.WithOpName("skip_reset"), acc);
    return args;
  };
  auto cond = [](const Scope& c, const std::vector<Output>& args) {
    return ops::Identity(c, args[0]);
  };
  absl::StatusOr<loops::Loop> reset =
      loops::WhileLoop(s.WithNoControlDependencies(), cond, body, {skip_now},
                       /*infeed=*/nullptr, /*maximum_iterations=*/1);
  if (!reset.ok()) {
    scope.UpdateStatus(reset.status());
    return nullptr;
  }
  return ops::Group(s.WithOpName("apply_or_skip"), {apply, reset->op});
}

DType GradientAccumulationOptimizer::GradientDType(
    const ops::VariableInfo& var) const {
  return dtype_.For(var);
}

Node* AccumulateGradient(const Scope& scope, Output acc, DType dtype,
                         Output grad, const AccumulationScales& scales) {
  Output g = CastTo(scope.WithOpName("grad/cast"), grad, dtype);
  if (scales.grad_scale_at_most_one && scales.grad_scale.valid() &&
      !scales.accum_scale.valid() && dtype == DType::kFloat32 &&
      scales.grad_scale.dtype() == DType::kFloat32) {
    // One pass over memory instead of two, bitwise the Mul + AssignAdd
    // below (ops/state/assign_add_scaled.h).
    return ops::AssignAddScaled(scope.WithOpName("accumulate"), acc, g,
                                scales.grad_scale);
  }
  if (scales.grad_scale_at_most_one && scales.grad_scale.valid() &&
      scales.accum_scale.valid() && dtype == DType::kFloat32 &&
      scales.grad_scale.dtype() == DType::kFloat32 &&
      scales.accum_scale.dtype() == DType::kFloat32) {
    // A pipeline's accumulation (scales fed per micro-batch): one pass,
    // bitwise the two Muls, Add and Assign below.
    return ops::AssignScaledAddScaled(scope.WithOpName("accumulate"), acc, g,
                                      scales.accum_scale, scales.grad_scale);
  }
  if (scales.grad_scale.valid()) {
    g = ops::Mul(
        scope.WithOpName("scaled_grad"), g,
        CastTo(scope.WithOpName("grad_scale"), scales.grad_scale, dtype));
  }
  if (!scales.accum_scale.valid()) {
    return ops::AssignAdd(scope.WithOpName("accumulate"), acc, g);
  }
  Output old = ops::Mul(
      scope.WithOpName("scaled_accumulator"),
      ops::ReadVariable(scope.WithOpName("accumulator_value"), acc),
      CastTo(scope.WithOpName("accum_scale"), scales.accum_scale, dtype));
  return ops::Assign(scope.WithOpName("accumulate"), acc,
                     ops::Add(scope.WithOpName("running_mean"), old, g));
}

MicroBatchScales MakeMicroBatchScales(const Scope& scope, Method method,
                                      Output n, bool first_overwrites) {
  MicroBatchScales step;
  if (method == Method::kRunningMean) {
    // acc is the mean of the gradients so far: 0 / 1 = 0 at n = 0.
    const Scope s = scope.NewSubScope("running_mean");
    Output nf = ops::Cast(s.WithOpName("n"), n, DType::kFloat32);
    Output n1 = ops::Add(s.WithOpName("n_plus_one"), nf, ops::Const(s, 1.f));
    step.accum_scale = ops::Div(s.WithOpName("accum_scale"), nf, n1);
    step.grad_scale =
        ops::Div(s.WithOpName("grad_scale"), ops::Const(s, 1.f), n1);
  } else if (first_overwrites) {
    // min(n, 1): 0 for the first micro-batch, 1 after it.
    step.accum_scale = ops::Cast(
        scope.WithOpName("accum_scale"),
        ops::Minimum(scope.WithOpName("not_first"), n,
                     ops::Const(scope.WithOpName("one"), 1, DType::kInt32)),
        DType::kFloat32);
  }
  return step;
}

AccumulationScales ReductionScales(const Scope& scope, Method method,
                                   int64_t num, const MicroBatchScales& step,
                                   DType dtype) {
  AccumulationScales scales{step.accum_scale, step.grad_scale,
                            /*grad_scale_at_most_one=*/true};
  if (method == Method::kMean) {
    // Each gradient is scaled before it is added: no float16 overflow.
    scales.grad_scale =
        ops::Const(scope.WithOpName("mean_scale"), 1.0 / num, dtype);
  } else if (method == Method::kSum && scales.accum_scale.valid()) {
    // Both scales: one fused pass (AssignScaledAddScaled) for float32.
    scales.grad_scale = ops::Const(scope.WithOpName("sum_scale"), 1.f);
  }
  return scales;
}

Node* GradientAccumulationOptimizer::Accumulate(const Scope& scope, Output acc,
                                                DType dtype,
                                                Output grad) const {
  return AccumulateGradient(
      scope, acc, dtype, grad,
      ReductionScales(scope, reduction_method_, num_mini_batches_, step_scales_,
                      dtype));
}

Node* GradientAccumulationOptimizer::ApplyIf(
    const Scope& scope, const Scope& inner_scope, Output apply_now, Output acc,
    DType dtype, const ops::VariableInfo& var, Output shard) const {
  // A loop body is the nodes built during the callback, whatever their
  // scope: the body's own scope would prefix every name with the loop's.
  auto body = [&](const Scope&, const std::vector<Output>& args) {
    Output total = ops::ReadVariable(scope.WithOpName("accumulated"), acc);
    // The inner optimizer's gradient dtype: float32 for a variable with a
    // float32 master, so a float32 accumulator is not rounded on its way.
    total = CastTo(scope.WithOpName("accumulated/cast"), total,
                   optimizer_->GradientDType(var));
    optimizer_->set_update_shard(shard);
    Node* applied =
        optimizer_->ApplyGradients(inner_scope, {{total, var.node}});
    optimizer_->set_update_shard(Output());
    if (shard.valid() && applied != nullptr) {
      // Each replica updated its chunk: one all-gather makes the weight
      // whole again (the state stays chunked until it is stored).
      ops::GatherVariableShards(
          scope.WithOpName("gather_shards").WithControlDependencies({applied}),
          Output(var.node), shard);
    }
    // In place, after the update: by then the read above is released, so
    // its copy-on-write snapshot does not make the reset copy the value.
    Scope reset = scope.WithOpName("reset");
    if (applied != nullptr) reset = reset.WithControlDependencies({applied});
    ops::AssignZeros(reset, acc);
    return args;  // At most one iteration: the flag need not change.
  };
  auto cond = [](const Scope& c, const std::vector<Output>& args) {
    return ops::Identity(c, args[0]);
  };
  absl::StatusOr<loops::Loop> loop =
      loops::WhileLoop(scope, cond, body, {apply_now}, /*infeed=*/nullptr,
                       /*maximum_iterations=*/1);
  if (!loop.ok()) {
    scope.UpdateStatus(loop.status());
    return nullptr;
  }
  return loop->op;
}

}  // namespace ipuflow::optimizers
