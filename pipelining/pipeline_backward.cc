// Builder, training: each part's backward (gradients, stash), the gradient
// accumulators (optimizers::AccumulateGradient, the wrapper's formula fed
// the micro-batch index) and the weight update (pipeline_builder.h).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/gradients.h"
#include "core/graph_collections.h"
#include "core/op_registry.h"
#include "core/option_checks.h"
#include "ops/array/const.h"
#include "ops/array/fill.h"
#include "ops/collective/sharded_update.h"
#include "ops/control/pipeline_frame.h"
#include "ops/math/add.h"
#include "ops/math/cast.h"
#include "ops/math/mul.h"
#include "ops/state/assign.h"
#include "ops/state/handle.h"
#include "ops/state/read_variable.h"
#include "ops/state/variable.h"
#include "optimizers/cross_replica.h"
#include "optimizers/offloaded_state.h"
#include "pipelining/pipeline_builder.h"
#include "pipelining/pipeline_frame.h"
#include "pipelining/pipeline_internal.h"
#include "pipelining/validation.h"

namespace ipuflow::pipelining::internal {

bool Stashable(const Node* n) {
  return n->op() != "Const" && !ops::IsVariable(n) &&
         n->op() != "ReadVariable" && n->op() != "Placeholder";
}

namespace {

// What a part's backward differentiates for: the float arguments it reads
// (not stage 0's: they come from the host, nobody needs their gradient),
// then every read of its trainable variables.
struct BackwardXs {
  std::vector<Output> xs;
  std::vector<int> arg_of_x;  // The argument of xs[k], k < arg_of_x.size().
  std::vector<Node*> x_var;   // The variable of xs[arg_of_x.size() + k].
};

BackwardXs CollectXs(const Graph& g, const PartDef& part, int begin, int end) {
  BackwardXs x;
  for (size_t i = 0; i < part.args.size() && part.stage > 0; ++i) {
    if (part.arg_used[i] && IsDifferentiable(part.args[i].dtype())) {
      x.xs.push_back(part.args[i]);
      x.arg_of_x.push_back(static_cast<int>(i));
    }
  }
  for (int id = begin; id < end; ++id) {
    Node* n = g.node(id);
    if (n->op() != "ReadVariable") continue;
    Node* var = n->input(0).node;
    if (std::find(part.variables.begin(), part.variables.end(), var) ==
        part.variables.end()) {
      continue;
    }
    x.xs.push_back(Output(n));
    x.x_var.push_back(var);
  }
  return x;
}

// The stash: forward values of nodes [begin, end) that some backward node
// (from `grads_begin` on) consumes.
std::set<Output> BackwardReads(const Graph& g, int begin, int end,
                               int grads_begin) {
  std::set<Output> stash;
  for (int id = grads_begin; id < g.num_nodes(); ++id) {
    for (const Output& in : g.node(id)->inputs()) {
      const int src = in.node->id();
      if (src < begin || src >= end || !Stashable(in.node)) continue;
      stash.insert(in);
    }
  }
  return stash;
}

// With recomputation only stateful values are kept (recomputing them
// would give other values) and recomputation checkpoints (kept to cap
// the recomputation, ops/array/recomputation_checkpoint.h); everything
// else is recomputed from the args.
std::set<Output> RecomputationKeeps(const Graph& g, int begin, int end) {
  std::set<Output> stash_rc;
  for (int id = begin; id < end; ++id) {
    Node* n = g.node(id);
    const bool keep =
        n->op_def().is_stateful() || n->op() == "RecomputationCheckpoint";
    if (!keep || !Stashable(n)) continue;
    for (int k = 0; k < n->num_outputs(); ++k) stash_rc.insert(Output(n, k));
  }
  return stash_rc;
}

}  // namespace

void Builder::BuildBackward(PartDef& part, int begin, int end) {
  Graph* g = scope_.graph();
  Scope bs =
      scope_
          .NewSubScope(absl::StrCat(
              "stage", part.stage,
              part.part ? absl::StrCat("_", part.part) : "", "_backward"))
          .WithIpu(part.ipu);
  part.grad_outputs.assign(part.outputs.size(), Output());
  std::optional<BackwardTargets> targets;
  if (part.stage + 1 == num_stages()) {
    targets = LossTargets(bs);
    if (!targets.has_value()) return;
  } else {
    targets = OutputTargets(bs, part);
  }
  const BackwardXs x = CollectXs(*g, part, begin, end);
  part.grad_args.assign(part.args.size(), Output());
  if (targets->ys.empty() || x.xs.empty()) return;
  part.has_backward = true;
  const int grads_begin = g->num_nodes();
  std::vector<Output> grads;
  absl::Status s =
      AddGradients(bs, targets->ys, x.xs, targets->grad_ys, &grads);
  if (!s.ok()) {
    violations_.push_back(absl::StrCat(part.name, ": ", s.message()));
    return;
  }
  const size_t num_arg_xs = x.arg_of_x.size();
  for (size_t k = 0; k < num_arg_xs; ++k)
    part.grad_args[x.arg_of_x[k]] = grads[k];
  // This part's gradient of each variable (another part reading a tied
  // weight accumulates its own).
  std::map<Node*, std::vector<Output>> var_grads;
  for (size_t k = num_arg_xs; k < x.xs.size(); ++k) {
    var_grads[x.x_var[k - num_arg_xs]].push_back(grads[k]);
  }
  if (!BuildAccumulation(part, bs, var_grads)) return;
  const std::set<Output> stash = BackwardReads(*g, begin, end, grads_begin);
  const std::set<Output> stash_rc = RecomputationKeeps(*g, begin, end);
  part.stash.assign(stash.begin(), stash.end());
  part.stash_recompute.assign(stash_rc.begin(), stash_rc.end());
}

std::optional<Builder::BackwardTargets> Builder::LossTargets(const Scope& bs) {
  if (!b_->loss.valid() || b_->optimizer == nullptr) {
    violations_.push_back(
        "optimizer_function must return an optimizer and a loss");
    return std::nullopt;
  }
  if (!IsDifferentiable(b_->loss.dtype()) || b_->loss.shape().rank() != 0) {
    violations_.push_back(absl::StrCat(
        "the loss '", b_->loss.name(), "' must be a float scalar, got ",
        DTypeName(b_->loss.dtype()), b_->loss.shape().DebugString()));
    return std::nullopt;
  }
  if (b_->optimizer->accumulates_gradients()) {
    violations_.push_back(absl::StrCat(
        "optimizer_function returned a gradient-accumulation optimizer ('",
        b_->optimizer->name(),
        "'): a pipeline accumulates gradients "
        "itself (gradient_accumulation_count); pass the inner optimizer"));
    return std::nullopt;
  }
  if (b_->optimizer->updates_conditionally()) {
    violations_.push_back(absl::StrCat(
        "optimizer_function returned '", b_->optimizer->name(),
        "', whose update is conditional (GradScaler's skipped steps): not "
        "supported in a pipeline yet; use static or automatic (histogram) "
        "loss scaling"));
    return std::nullopt;
  }
  BackwardTargets t;
  t.ys.push_back(b_->loss);
  // A loss-scaling optimizer seeds the backward pass with its scale
  // (loss x S differentiated); others with ones.
  Output seed = b_->optimizer->LossGradientSeed(bs, b_->loss);
  if (!scope_.ok()) {
    violations_.push_back(std::string(scope_.status().message()));
    return std::nullopt;
  }
  if (seed.valid()) t.grad_ys.push_back(seed);
  return t;
}

Builder::BackwardTargets Builder::OutputTargets(const Scope& bs,
                                                PartDef& part) {
  BackwardTargets t;
  for (size_t j = 0; j < part.outputs.size(); ++j) {
    const Output& y = part.outputs[j];
    if (!IsDifferentiable(y.dtype())) continue;
    part.grad_outputs[j] = ops::Placeholder(
        bs.WithOpName(absl::StrCat("d_output", j)), y.dtype(), y.shape());
    t.ys.push_back(y);
    t.grad_ys.push_back(part.grad_outputs[j]);
  }
  return t;
}

bool Builder::BuildAccumulation(
    PartDef& part, const Scope& bs,
    const std::map<Node*, std::vector<Output>>& var_grads) {
  // Accumulate: acc <- acc * accum_scale + cast(grad) * grad_scale, the
  // optimizer wrapper's formula (optimizers::ReductionScales) fed the
  // micro-batch index; its first micro-batch overwrites (a stopped step may
  // have left partial sums behind; the reset runs after the update).
  Scope as = bs.NewSubScope("accumulate");
  optimizers::MicroBatchScales step;
  for (Node* var : part.variables) {
    auto it = var_grads.find(var);
    if (it == var_grads.end()) continue;
    Node* acc = Accumulator(var, part);
    if (acc == nullptr) return false;
    const DType dt = acc->attr<DType>("dtype");
    if (!part.micro_batch.valid()) {
      part.micro_batch =
          ops::Placeholder(as.WithOpName("micro_batch"), DType::kInt32, {});
      step = optimizers::MakeMicroBatchScales(as, o_.reduction_method,
                                              part.micro_batch,
                                              /*first_overwrites=*/true);
    }
    Scope vs = as.NewSubScope(var->name());
    part.accumulate.push_back(optimizers::AccumulateGradient(
        vs, Output(acc), dt, AddTerms(vs, it->second),
        optimizers::ReductionScales(vs, o_.reduction_method,
                                    o_.gradient_accumulation_count, step, dt)));
  }
  return true;
}

Node* Builder::Accumulator(Node* var, const PartDef& part) {
  std::vector<std::pair<std::string, Node*>>& accs = accumulators_of_[var];
  for (const auto& [reader, acc] : accs) {
    if (reader == part.name) return acc;
  }
  absl::StatusOr<ops::VariableInfo> info = ops::GetVariableInfo(Output(var));
  if (!info.ok()) {
    violations_.push_back(std::string(info.status().message()));
    return nullptr;
  }
  const DType dt = o_.gradient_accumulation_dtype.For(*info);
  if (!IsFloating(dt)) {
    // A fixed dtype is reported once by CheckOptions.
    if (!o_.gradient_accumulation_dtype.fixed().has_value()) {
      violations_.push_back(
          absl::StrCat("gradient_accumulation_dtype of '", info->name,
                       "' must be float32 or float16, got ", DTypeName(dt)));
    }
    return nullptr;
  }
  // One sub-scope for all: "<pipeline>/accumulators/<variable>".
  if (!accumulators_scope_.has_value()) {
    accumulators_scope_ = scope_.NewSubScope("accumulators");
  }
  const Scope s = accumulators_scope_->WithIpu(var->ipu());
  ops::VariableOptions vo;
  vo.trainable = false;
  Output zeros = ops::Fill(s.WithOpName(var->name() + "/zeros"),
                           var->attr<TensorShape>("shape"), 0, dt);
  // The first reader's keeps the variable's name (checkpoints of untied
  // weights are unchanged); another's adds its stage: ".../wte/stage3".
  const std::string name =
      accs.empty()
          ? var->name()
          : absl::StrCat(var->name(), "/stage", part.stage,
                         part.part > 0 ? absl::StrCat("_", part.part) : "");
  ops::VariableHandle acc = ops::Variable(s.WithOpName(name), zeros, vo);
  if (!scope_.ok()) return nullptr;
  if (accs.empty()) accumulated_.push_back(var);
  accs.push_back({part.name, acc.handle.node});
  b_->accumulators.push_back(acc.handle.node);
  // The memory plan counts it as an accumulator (core/memory_plan.h).
  scope_.graph()->AddToCollection(kGradientAccumulatorsCollection,
                                  acc.handle.node);
  return acc.handle.node;
}

void Builder::BuildWeightUpdate() {
  Scope ws = scope_.NewSubScope("weight_update");
  std::vector<optimizers::GradAndVar> gv;
  for (Node* var : accumulated_) {
    Scope vs = ws.NewSubScope(var->name()).WithIpu(var->ipu());
    // In the dtype the optimizer wants: float32 for a variable with a
    // float32 master, so a float32 accumulator is not rounded on its way.
    absl::StatusOr<ops::VariableInfo> info = ops::GetVariableInfo(Output(var));
    const DType want = info.ok() ? b_->optimizer->GradientDType(*info)
                                 : var->attr<DType>("dtype");
    // A tied weight's gradient: its readers' accumulations summed.
    std::vector<Output> terms;
    for (const auto& [reader, acc] : accumulators_of_.at(var)) {
      Output g = ops::ReadVariable(vs, Output(acc));
      if (g.dtype() != want) g = ops::Cast(vs, g, want);
      terms.push_back(g);
    }
    gv.push_back({AddTerms(vs, terms), var});
  }
  if (gv.empty()) {
    violations_.push_back(
        "the loss does not depend on any trainable variable read in a stage: "
        "nothing to train");
    return;
  }
  // Offloading: the device loops' mechanism (core/ipu/remote_state.h).
  // ZeRO-1: each weight's update takes the shard its load node gives
  // (whether its state is sharded is known when the program is compiled).
  std::map<const Node*, Output> shards;
  if (o_.offload_weight_update_variables) {
    RemoteStateOptions ro;
    ro.offload_weight_update_variables = true;
    ro.replicated_optimizer_state_sharding =
        o_.replicated_optimizer_state_sharding;
    ro.replica_identical =
        dynamic_cast<const optimizers::CrossReplicaOptimizer*>(
            b_->optimizer.get()) != nullptr;
    ro.replica_identical_fix =
        absl::StrCat("wrap the optimizer '", b_->optimizer->name(),
                     "' in optimizers::CrossReplicaOptimizer");
    b_->offloaded_state = std::make_shared<RemoteState>(
        absl::StrCat("pipeline '", o_.name, "'"), ro);
    offloaded_state_id_ = scope_.graph()->UniqueName(
        absl::StrCat(ws.prefix(), "/offloaded_state"));
    if (o_.replicated_optimizer_state_sharding &&
        b_->optimizer->UpdatesElementwise()) {
      for (const optimizers::GradAndVar& x : gv) {
        const int update = static_cast<int>(b_->weight_shards.size());
        Output shard = OffloadUpdate(
            ws.NewSubScope(x.variable->name()).WithIpu(x.variable->ipu()),
            update);
        shards[x.variable] = shard;
        b_->weight_shards.push_back({x.variable, shard});
      }
    }
  }
  const int first_new = scope_.graph()->num_nodes();
  b_->optimizer->set_update_shards(shards);
  Node* apply = b_->optimizer->ApplyGradients(ws, gv);
  b_->optimizer->set_update_shards({});
  if (!scope_.ok() || apply == nullptr) {
    violations_.push_back(absl::StrCat("the weight update failed to build: ",
                                       scope_.status().message()));
    return;
  }
  if (b_->offloaded_state != nullptr) ListOffloadedState(ws, first_new);
  b_->weight_update.push_back(apply);
  // Each replica updated its chunk: one all-gather per weight makes it
  // whole again (the state stays chunked until it is stored).
  for (const BuiltPipeline::WeightShard& w : b_->weight_shards) {
    b_->weight_update.push_back(
        ops::GatherVariableShards(ws.NewSubScope(w.variable->name())
                                      .WithIpu(w.variable->ipu())
                                      .WithOpName("gather_shards")
                                      .WithControlDependencies({apply}),
                                  Output(w.variable), w.shard));
  }
  Scope rs = ws.NewSubScope("reset").WithControlDependencies({apply});
  for (Node* acc : b_->accumulators) {
    Scope as = rs.WithIpu(acc->ipu());
    b_->weight_update.push_back(
        ops::Assign(as, Output(acc),
                    ops::Fill(as, acc->attr<TensorShape>("shape"), 0,
                              acc->attr<DType>("dtype"))));
  }
}

Output Builder::OffloadUpdate(const Scope& scope, int update) {
  const std::shared_ptr<RemoteState>& state = b_->offloaded_state;
  Output on =
      ops::Const(scope.WithOpName("offload/on"), Tensor::Scalar<bool>(true));
  Output load = optimizers::OffloadedStateLoad(
      scope.WithOpName("offload/load"), offloaded_state_id_, state, update, on);
  Output store =
      optimizers::OffloadedStateStore(scope.WithOpName("offload/store"),
                                      offloaded_state_id_, state, update, on);
  if (!scope.ok()) return Output();
  b_->offload_loads.push_back(load.node);
  b_->offload_stores.push_back(store.node);
  return Output(load.node, 1);
}

void Builder::ListOffloadedState(const Scope& ws, int first_new) {
  const Graph& g = *scope_.graph();
  const int end = g.num_nodes();
  // A sharded weight's state: what its update ops (its shard's users) read.
  std::map<const Node*, int> update_of;
  std::vector<const Node*> state;
  for (int i = first_new; i < end; ++i) {
    const Node* n = g.node(i);
    if (ops::IsVariable(n)) state.push_back(n);
    for (size_t w = 0; w < b_->weight_shards.size(); ++w) {
      const BuiltPipeline::WeightShard& shard = b_->weight_shards[w];
      const auto& in = n->inputs();
      if (std::find(in.begin(), in.end(), shard.shard) == in.end()) continue;
      for (const Output& x : in) {
        if (ops::IsVariable(x.node) && x.node->id() >= first_new &&
            std::max(0, x.node->ipu()) == std::max(0, shard.variable->ipu())) {
          update_of.emplace(x.node, static_cast<int>(w));
        }
      }
    }
  }
  // The rest (Adam's step, state of whole updates): one update per IPU.
  std::map<int, int> ipu_update;
  for (const Node* n : state) {
    absl::StatusOr<ops::VariableInfo> info =
        ops::GetVariableInfo(Output(const_cast<Node*>(n)));
    if (!info.ok()) {
      violations_.push_back(std::string(info.status().message()));
      return;
    }
    int update;
    if (auto it = update_of.find(n); it != update_of.end()) {
      update = it->second;
    } else {
      const int k = std::max(0, n->ipu());
      auto [at, added] = ipu_update.try_emplace(
          k, static_cast<int>(b_->weight_shards.size() + ipu_update.size()));
      if (added) {
        OffloadUpdate(ws.NewSubScope(absl::StrCat("offload_ipu", k)).WithIpu(k),
                      at->second);
      }
      update = at->second;
    }
    b_->offloaded_state->AddVariable(update, n, info->name);
  }
  for (size_t w = 0; w < b_->weight_shards.size(); ++w) {
    b_->offloaded_state->ShardUpdate(static_cast<int>(w),
                                     b_->weight_shards[w]
                                         .variable->attr<TensorShape>("shape")
                                         .num_elements());
  }
}

}  // namespace ipuflow::pipelining::internal
