// Pipeline::Create(): validates the options and builds every stage part in the
// graph (forward; in training also its backward, gradient accumulators and
// the weight update). The runtime (pipeline_runtime.cc) compiles and runs
// what is built here.
#include "pipelining/pipeline.h"

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
#include "pipelining/pipeline_frame.h"
#include "pipelining/pipeline_internal.h"
#include "pipelining/pipeline_runtime.h"
#include "pipelining/validation.h"

namespace ipuflow::pipelining {

const char* RecomputationModeName(RecomputationMode mode) {
  switch (mode) {
    case RecomputationMode::kAuto:
      return "Auto";
    case RecomputationMode::kRecomputeThenBackpropagate:
      return "RecomputeThenBackpropagate";
    case RecomputationMode::kRecomputeAndBackpropagateInterleaved:
      return "RecomputeAndBackpropagateInterleaved";
  }
  return "?";
}

namespace {

struct ArgSpec {
  DType dtype;
  TensorShape shape;
  std::string what;  // For errors: "output 1 of stage 0".
};

std::string ShapeStr(const ArgSpec& a) {
  return absl::StrCat(DTypeName(a.dtype), a.shape.DebugString());
}

// Graph building for one Pipeline::Create() call; collects violations.
class Builder {
 public:
  Builder(const Scope& scope, BuiltPipeline* b)
      : scope_(scope.NewSubScope(b->options.name)), b_(b), o_(b->options) {}

  absl::Status Build();
  // The PipelineFrame node running `frame`, named "<name>/frame".
  absl::StatusOr<Node*> BuildFrame(std::shared_ptr<PipelineDeviceFrame> frame) {
    // The host resource id: unique in the process, so in the graph too.
    static std::atomic<uint64_t> next_id{1};
    const uint64_t id = next_id.fetch_add(1, std::memory_order_relaxed);
    return ops::PipelineFrame(
        scope_, absl::StrCat("pipeline frame ", id, " '", o_.name, "'"),
        std::move(frame), o_.inputs);
  }

 private:
  int num_stages() const {
    return static_cast<int>(o_.computational_stages.size());
  }
  void CheckOptions();
  std::vector<ArgSpec> FirstStageArgs();
  void BuildStage(int s, const std::vector<ArgSpec>& args);
  void CheckCaptures(const PartDef& part, int begin, int end);
  void FindUsesAndVariables(PartDef& part, int begin, int end);
  void BuildBackward(PartDef& part, int begin, int end);
  Node* Accumulator(Node* variable);
  void BuildWeightUpdate();
  void BuildOutfeed();

  Scope scope_;
  BuiltPipeline* b_;
  const PipelineOptions& o_;
  std::vector<std::string> violations_;
  std::vector<int> logical_mapping_;
  std::vector<std::vector<int>> part_ipus_;
  bool mapping_ok_ = true;
  std::map<Node*, std::string> variable_owner_;  // Variable -> part name.
  std::optional<Scope> accumulators_scope_;
  std::map<Node*, Node*> accumulator_of_;  // Variable -> accumulator.
  std::map<Node*, std::vector<Output>> var_grads_;
};

void Builder::CheckOptions() {
  const int n = num_stages();
  // Resolve the mapping: identity puts every part of stage s on IPU s.
  if (o_.device_mapping.empty()) {
    for (int s = 0; s < n; ++s) {
      part_ipus_.push_back(
          std::vector<int>(o_.computational_stages[s].functions.size(), s));
      logical_mapping_.push_back(s);
    }
  } else {
    for (const StageDevices& d : o_.device_mapping) {
      logical_mapping_.push_back(d.ipus.empty() ? -1 : d.ipus[0]);
    }
    if (o_.device_mapping.size() != o_.computational_stages.size()) {
      mapping_ok_ = false;
    } else {
      for (int s = 0; s < n; ++s) {
        const auto& fns = o_.computational_stages[s].functions;
        const auto& ipus = o_.device_mapping[s].ipus;
        part_ipus_.push_back(ipus);
        if (fns.size() != ipus.size()) {
          mapping_ok_ = false;
          violations_.push_back(absl::StrCat(
              "stage ", s, " has ", fns.size(),
              " concurrent function(s) but device_mapping[", s, "] lists ",
              ipus.size(), " IPU(s): give one IPU per concurrent stage"));
        }
        for (int ipu : ipus) mapping_ok_ &= ipu >= 0;
      }
    }
  }
  const bool training = b_->training;
  // validation.h's rules first, then the concurrent-mapping ones above.
  std::vector<std::string> rules =
      PipelineViolations(o_.pipeline_schedule, n, logical_mapping_,
                         o_.gradient_accumulation_count, training);
  violations_.insert(violations_.begin(), rules.begin(), rules.end());
  if (n < 2) mapping_ok_ = false;
  // Interleaved training: one stage per IPU, concurrent parts included
  // (the logical mapping above only sees each stage's first IPU).
  if (training && mapping_ok_ &&
      o_.pipeline_schedule == PipelineSchedule::kInterleaved) {
    std::map<int, int> stage_on;
    for (int s = 0; s < n; ++s) {
      for (size_t p = 1; p < part_ipus_[s].size(); ++p) {
        const int ipu = part_ipus_[s][p];
        auto [it, fresh] = stage_on.insert({ipu, s});
        bool clash = !fresh && it->second != s;
        for (int t = 0; t < n; ++t)
          clash |= t != s && logical_mapping_[t] == ipu;
        if (clash) {
          violations_.push_back(absl::StrCat(
              "the pipelining schedule 'Interleaved' does not support several "
              "stages on one IPU for training: concurrent stage ",
              s, ".", p, " shares IPU ", ipu,
              " with another stage; use Grouped"));
        }
      }
    }
  }
  if (o_.repeat_count < 1) {
    violations_.push_back(
        absl::StrCat("repeat_count must be >= 1, got ", o_.repeat_count));
  }
  // Enums, upper bounds and products (core/option_checks.h).
  OptionChecker check("PipelineOptions");
  check.Enum("recomputation_mode", "RecomputationMode", o_.recomputation_mode,
             {{RecomputationMode::kAuto, "Auto"},
              {RecomputationMode::kRecomputeThenBackpropagate,
               "RecomputeThenBackpropagate"},
              {RecomputationMode::kRecomputeAndBackpropagateInterleaved,
               "RecomputeAndBackpropagateInterleaved"}});
  check.Enum("reduction_method", "ReductionMethod", o_.reduction_method,
             {{ReductionMethod::kSum, "Sum"},
              {ReductionMethod::kMean, "Mean"},
              {ReductionMethod::kRunningMean, "RunningMean"}});
  if (o_.repeat_count >= 1 && o_.gradient_accumulation_count >= 1) {
    check.Product(
        {{"repeat_count", o_.repeat_count},
         {"gradient_accumulation_count", o_.gradient_accumulation_count}},
        std::numeric_limits<int>::max(),
        " micro-batches in one run (counted in int)");
  }
  if (o_.accumulate_outfeed && o_.outfeed_queue == nullptr) {
    check.Fail(
        "accumulate_outfeed requires an outfeed_queue (the sum it enqueues "
        "would go nowhere)");
  }
  violations_.insert(violations_.end(), check.messages().begin(),
                     check.messages().end());
  if (o_.virtual_costs.has_value()) {
    const StageCosts& c = *o_.virtual_costs;
    auto bad = [n](const std::vector<double>& v) {
      return static_cast<int>(v.size()) != n ||
             !std::all_of(v.begin(), v.end(),
                          [](double x) { return std::isfinite(x) && x >= 0; });
    };
    if (bad(c.forward) || (training && bad(c.backward))) {
      violations_.push_back(absl::StrCat(
          "virtual_costs needs one finite cost >= 0 per stage for the forward",
          training ? " and the backward" : "", " (", n, " stages)"));
    }
  }
  if (o_.outfeed_loss && !training) {
    violations_.push_back(
        "outfeed_loss requires an optimizer_function (a training pipeline)");
  }
  if (o_.outfeed_loss && o_.outfeed_queue == nullptr) {
    violations_.push_back("outfeed_loss requires an outfeed_queue");
  }
  if (o_.replicated_optimizer_state_sharding &&
      !o_.offload_weight_update_variables) {
    // The original's text (TensorFlow IPU, ops/op_util.py).
    violations_.push_back(
        "To use replicated_optimizer_state_sharding, optimizer state must be "
        "offloaded by using offload_weight_update_variables.");
  }
  const std::optional<DType> fixed = o_.gradient_accumulation_dtype.fixed();
  if (fixed.has_value() && *fixed != DType::kFloat32 &&
      *fixed != DType::kFloat16) {
    violations_.push_back(absl::StrCat(
        "gradient_accumulation_dtype must be float32 or float16, got ",
        DTypeName(*fixed)));
  }
  const auto mode = o_.recomputation_mode;
  if (mode == RecomputationMode::kRecomputeAndBackpropagateInterleaved &&
      o_.pipeline_schedule == PipelineSchedule::kInterleaved) {
    violations_.push_back(
        "pipeline schedule 'Interleaved' does not support the "
        "'RecomputeAndBackpropagateInterleaved' recomputation mode: use "
        "RecomputeThenBackpropagate or Auto");
  }
  if (mode == RecomputationMode::kRecomputeThenBackpropagate &&
      o_.pipeline_schedule == PipelineSchedule::kSequential) {
    violations_.push_back(
        "pipeline schedule 'Sequential' does not support the "
        "'RecomputeThenBackpropagate' recomputation mode: use "
        "RecomputeAndBackpropagateInterleaved or Auto");
  }
  if (training && n >= 2 &&
      o_.computational_stages.back().functions.size() > 1) {
    violations_.push_back(
        "the last stage of a training pipeline cannot be a list of concurrent "
        "stages: its outputs feed the optimizer_function's loss; add a stage "
        "after it that computes the loss");
  }
  for (int s = 0; s < n; ++s) {
    if (o_.computational_stages[s].functions.empty()) {
      mapping_ok_ = false;
      violations_.push_back(absl::StrCat("stage ", s, " has no function"));
    }
  }
}

std::vector<ArgSpec> Builder::FirstStageArgs() {
  std::vector<ArgSpec> args;
  for (size_t i = 0; i < o_.inputs.size(); ++i) {
    const Output& in = o_.inputs[i];
    if (!in.valid()) {
      violations_.push_back(absl::StrCat("inputs[", i, "] is invalid"));
      continue;
    }
    args.push_back({in.dtype(), in.shape(),
                    absl::StrCat("inputs[", i, "] '", in.name(), "'")});
  }
  if (o_.infeed_queue != nullptr) {
    const feeds::ElementSpec& spec = o_.infeed_queue->spec();
    for (int i = 0; i < spec.size(); ++i) {
      args.push_back({spec.dtypes[i], spec.shapes[i],
                      absl::StrCat("infeed component ", i)});
    }
  }
  return args;
}

void Builder::BuildStage(int s, const std::vector<ArgSpec>& args) {
  const ComputationalStage& cs = o_.computational_stages[s];
  StageDef& stage = b_->stages[s];
  const bool last = s + 1 == num_stages();
  for (size_t p = 0; p < cs.functions.size(); ++p) {
    const StageFunction& fn = cs.functions[p];
    PartDef part;
    part.stage = s;
    part.part = static_cast<int>(p);
    part.ipu = part_ipus_[s][p];
    part.name = cs.functions.size() > 1 ? absl::StrCat("stage ", s, ".", p)
                                        : absl::StrCat("stage ", s);
    if (fn.num_inputs >= 0 && fn.num_inputs != static_cast<int>(args.size())) {
      std::vector<std::string> got;
      for (const ArgSpec& a : args) got.push_back(ShapeStr(a));
      violations_.push_back(absl::StrCat(
          part.name, " takes ", fn.num_inputs, " input(s) but receives ",
          args.size(), " (", got.empty() ? "none" : absl::StrJoin(got, ", "),
          s == 0 ? ": inputs then the infeed element)"
                 : ": the previous stage's outputs)"));
      stage.parts.push_back(std::move(part));
      continue;
    }
    Scope ps = scope_
                   .NewSubScope(cs.functions.size() > 1
                                    ? absl::StrCat("stage", s, "_", p)
                                    : absl::StrCat("stage", s))
                   .WithIpu(part.ipu);
    const int begin = scope_.graph()->num_nodes();
    // Stage 0's first part reads the infeed itself, as a device loop's body
    // does: its element arguments are an InfeedDequeue node's outputs (the
    // other parts of stage 0 get the element from it, fed).
    const bool dequeues = s == 0 && p == 0 && o_.infeed_queue != nullptr;
    const size_t fed =
        dequeues ? args.size() - o_.infeed_queue->spec().size() : args.size();
    for (size_t i = 0; i < fed; ++i) {
      part.args.push_back(ops::Placeholder(
          ps.WithOpName(absl::StrCat("arg", i)), args[i].dtype, args[i].shape));
    }
    if (dequeues) {
      absl::StatusOr<std::vector<Output>> element =
          o_.infeed_queue->BuildDequeue(ps.WithOpName("infeed"));
      if (!element.ok()) {
        violations_.push_back(std::string(element.status().message()));
        return;
      }
      part.dequeued_from = static_cast<int>(fed);
      part.args.insert(part.args.end(), element->begin(), element->end());
      b_->infeed_id = o_.infeed_queue->id();
    }
    part.outputs = fn.body(ps, part.args);
    if (b_->training && last && scope_.ok()) {
      OptimizerFunctionOutput of = o_.optimizer_function(ps, part.outputs);
      b_->optimizer = of.opt;
      b_->loss = of.loss;
    }
    const int end = scope_.graph()->num_nodes();
    if (!scope_.ok()) {
      violations_.push_back(
          absl::StrCat(part.name, " (IPU ", part.ipu,
                       ") failed to build: ", scope_.status().message()));
      return;
    }
    for (size_t i = 0; i < part.outputs.size(); ++i) {
      const Output& out = part.outputs[i];
      if (!out.valid()) {
        violations_.push_back(
            absl::StrCat(part.name, " returned an invalid output ", i));
      } else if (!out.shape().IsFullyDefined()) {
        violations_.push_back(
            absl::StrCat(part.name, " output ", i, " '", out.name(),
                         "' has shape ", out.shape().DebugString(),
                         ": values crossing stages need static shapes"));
      }
    }
    CheckCaptures(part, begin, end);
    FindUsesAndVariables(part, begin, end);
    if (b_->training && violations_.empty()) BuildBackward(part, begin, end);
    stage.output_offset.push_back(stage.num_outputs);
    stage.num_outputs += static_cast<int>(part.outputs.size());
    stage.parts.push_back(std::move(part));
  }
}

void Builder::CheckCaptures(const PartDef& part, int begin, int end) {
  Graph* g = scope_.graph();
  std::set<Node*> reported;
  for (int id = begin; id < end; ++id) {
    Node* n = g->node(id);
    std::vector<Node*> sources = n->control_inputs();
    for (const Output& in : n->inputs()) sources.push_back(in.node);
    for (Node* src : sources) {
      if (src->id() >= begin || !reported.insert(src).second) continue;
      if (ops::IsVariable(src)) {
        const int ipu = std::max(0, src->ipu());
        if (ipu != part.ipu) {
          violations_.push_back(absl::StrCat(
              part.name, " (IPU ", part.ipu, ") uses variable '", src->name(),
              "' placed on IPU ", ipu,
              ": a variable can only be used by "
              "pipeline stages on its IPU; create it in the stage or in a "
              "scope WithIpu(",
              part.ipu, ")"));
        }
        continue;
      }
      violations_.push_back(absl::StrCat(
          part.name, " captures '", src->name(), "' (", src->op(),
          ") from outside the pipeline: it is not a variable. Pass it as part "
          "of the pipeline's inputs or infeed_queue"));
    }
  }
}

void Builder::FindUsesAndVariables(PartDef& part, int begin, int end) {
  Graph* g = scope_.graph();
  part.arg_used.assign(part.args.size(), false);
  std::set<Node*> trainable;
  for (Node* v : g->collection("trainable_variables")) trainable.insert(v);
  std::set<Node*> seen;
  for (size_t i = 0; i < part.args.size(); ++i) {
    for (const Output& out : part.outputs) {
      if (out == part.args[i]) part.arg_used[i] = true;  // Passed through.
    }
  }
  for (int id = begin; id < end; ++id) {
    Node* n = g->node(id);
    for (const Output& in : n->inputs()) {
      for (size_t i = 0; i < part.args.size(); ++i) {
        if (in == part.args[i]) part.arg_used[i] = true;
      }
    }
    if (n->op() != "ReadVariable") continue;
    Node* var = n->input(0).node;
    if (!trainable.count(var) || !seen.insert(var).second) continue;
    auto [it, fresh] = variable_owner_.insert({var, part.name});
    if (!fresh && it->second != part.name) {
      violations_.push_back(absl::StrCat(
          "variable '", var->name(), "' is used by ", it->second, " and by ",
          part.name, ": a trained variable belongs to one stage"));
      continue;
    }
    part.variables.push_back(var);
  }
}

// The value feeding the backward pass that the forward computed, when the
// backward consumes it: what the stash keeps (without recomputation).
bool Stashable(const Node* n) {
  return n->op() != "Const" && !ops::IsVariable(n) &&
         n->op() != "ReadVariable" && n->op() != "Placeholder";
}

void Builder::BuildBackward(PartDef& part, int begin, int end) {
  Graph* g = scope_.graph();
  const bool last = part.stage + 1 == num_stages();
  Scope bs =
      scope_
          .NewSubScope(absl::StrCat(
              "stage", part.stage,
              part.part ? absl::StrCat("_", part.part) : "", "_backward"))
          .WithIpu(part.ipu);
  std::vector<Output> ys, grad_ys;
  part.grad_outputs.assign(part.outputs.size(), Output());
  if (last) {
    if (!b_->loss.valid() || b_->optimizer == nullptr) {
      violations_.push_back(
          "optimizer_function must return an optimizer and a loss");
      return;
    }
    if (!IsDifferentiable(b_->loss.dtype()) || b_->loss.shape().rank() != 0) {
      violations_.push_back(absl::StrCat(
          "the loss '", b_->loss.name(), "' must be a float scalar, got ",
          DTypeName(b_->loss.dtype()), b_->loss.shape().DebugString()));
      return;
    }
    if (b_->optimizer->accumulates_gradients()) {
      violations_.push_back(absl::StrCat(
          "optimizer_function returned a gradient-accumulation optimizer ('",
          b_->optimizer->name(),
          "'): a pipeline accumulates gradients "
          "itself (gradient_accumulation_count); pass the inner optimizer"));
      return;
    }
    if (b_->optimizer->updates_conditionally()) {
      violations_.push_back(absl::StrCat(
          "optimizer_function returned '", b_->optimizer->name(),
          "', whose update is conditional (GradScaler's skipped steps): not "
          "supported in a pipeline yet; use static or automatic (histogram) "
          "loss scaling"));
      return;
    }
    ys.push_back(b_->loss);
    // A loss-scaling optimizer seeds the backward pass with its scale
    // (loss x S differentiated); others with ones.
    Output seed = b_->optimizer->LossGradientSeed(bs, b_->loss);
    if (!scope_.ok()) {
      violations_.push_back(std::string(scope_.status().message()));
      return;
    }
    if (seed.valid()) grad_ys.push_back(seed);
  } else {
    for (size_t j = 0; j < part.outputs.size(); ++j) {
      const Output& y = part.outputs[j];
      if (!IsDifferentiable(y.dtype())) continue;
      part.grad_outputs[j] = ops::Placeholder(
          bs.WithOpName(absl::StrCat("d_output", j)), y.dtype(), y.shape());
      ys.push_back(y);
      grad_ys.push_back(part.grad_outputs[j]);
    }
  }
  // xs: the float arguments the part reads, then every read of its
  // trainable variables.
  std::vector<Output> xs;
  std::vector<int> arg_of_x;
  // Stage 0's arguments come from the host: nobody needs their gradient.
  for (size_t i = 0; i < part.args.size() && part.stage > 0; ++i) {
    if (part.arg_used[i] && IsDifferentiable(part.args[i].dtype())) {
      xs.push_back(part.args[i]);
      arg_of_x.push_back(static_cast<int>(i));
    }
  }
  const size_t num_arg_xs = xs.size();
  std::vector<Node*> x_var;
  for (int id = begin; id < end; ++id) {
    Node* n = g->node(id);
    if (n->op() != "ReadVariable") continue;
    Node* var = n->input(0).node;
    if (std::find(part.variables.begin(), part.variables.end(), var) ==
        part.variables.end()) {
      continue;
    }
    xs.push_back(Output(n));
    x_var.push_back(var);
  }
  part.grad_args.assign(part.args.size(), Output());
  if (ys.empty() || xs.empty()) return;
  part.has_backward = true;
  const int grads_begin = g->num_nodes();
  std::vector<Output> grads;
  absl::Status s = AddGradients(bs, ys, xs, grad_ys, &grads);
  if (!s.ok()) {
    violations_.push_back(absl::StrCat(part.name, ": ", s.message()));
    return;
  }
  for (size_t k = 0; k < num_arg_xs; ++k)
    part.grad_args[arg_of_x[k]] = grads[k];
  for (size_t k = num_arg_xs; k < xs.size(); ++k) {
    var_grads_[x_var[k - num_arg_xs]].push_back(grads[k]);
  }
  // Accumulate: acc <- acc * accum_scale + cast(grad) * grad_scale, the
  // optimizer wrapper's formula (optimizers::ReductionScales) fed the
  // micro-batch index; its first micro-batch overwrites (a stopped step may
  // have left partial sums behind; the reset runs after the update).
  Scope as = bs.NewSubScope("accumulate");
  optimizers::MicroBatchScales step;
  for (Node* var : part.variables) {
    auto it = var_grads_.find(var);
    if (it == var_grads_.end()) continue;
    Node* acc = Accumulator(var);
    if (acc == nullptr) return;
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
  // The stash: forward values some backward node consumes.
  std::set<Output> stash, stash_rc;
  for (int id = grads_begin; id < g->num_nodes(); ++id) {
    for (const Output& in : g->node(id)->inputs()) {
      const int src = in.node->id();
      if (src < begin || src >= end || !Stashable(in.node)) continue;
      stash.insert(in);
    }
  }
  // With recomputation only stateful values are kept (recomputing them
  // would give other values) and recomputation checkpoints (kept to cap
  // the recomputation, ops/array/recomputation_checkpoint.h); everything
  // else is recomputed from the args.
  for (int id = begin; id < end; ++id) {
    Node* n = g->node(id);
    const bool keep =
        n->op_def().is_stateful() || n->op() == "RecomputationCheckpoint";
    if (!keep || !Stashable(n)) continue;
    for (int k = 0; k < n->num_outputs(); ++k) stash_rc.insert(Output(n, k));
  }
  part.stash.assign(stash.begin(), stash.end());
  part.stash_recompute.assign(stash_rc.begin(), stash_rc.end());
}

Node* Builder::Accumulator(Node* var) {
  auto it = accumulator_of_.find(var);
  if (it != accumulator_of_.end()) return it->second;
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
  ops::VariableHandle acc = ops::Variable(s.WithOpName(var->name()), zeros, vo);
  if (!scope_.ok()) return nullptr;
  accumulator_of_[var] = acc.handle.node;
  b_->accumulators.push_back(acc.handle.node);
  return acc.handle.node;
}

void Builder::BuildWeightUpdate() {
  Scope ws = scope_.NewSubScope("weight_update");
  std::vector<optimizers::GradAndVar> gv;
  for (Node* acc : b_->accumulators) {
    Node* var = nullptr;
    for (const auto& [v, a] : accumulator_of_) {
      if (a == acc) var = v;
    }
    Scope vs = ws.NewSubScope(var->name()).WithIpu(var->ipu());
    Output g = ops::ReadVariable(vs, Output(acc));
    // In the dtype the optimizer wants: float32 for a variable with a
    // float32 master, so a float32 accumulator is not rounded on its way.
    absl::StatusOr<ops::VariableInfo> info = ops::GetVariableInfo(Output(var));
    const DType want = info.ok() ? b_->optimizer->GradientDType(*info)
                                 : var->attr<DType>("dtype");
    if (g.dtype() != want) g = ops::Cast(vs, g, want);
    gv.push_back({g, var});
  }
  if (gv.empty()) {
    violations_.push_back(
        "the loss does not depend on any trainable variable read in a stage: "
        "nothing to train");
    return;
  }
  // ZeRO-1: each weight's update takes a shard the runtime feeds (whether
  // its state is sharded is known when the program is compiled).
  std::map<const Node*, Output> shards;
  if (o_.replicated_optimizer_state_sharding &&
      o_.offload_weight_update_variables &&
      b_->optimizer->UpdatesElementwise()) {
    for (const optimizers::GradAndVar& x : gv) {
      Output shard = ops::Placeholder(ws.NewSubScope(x.variable->name())
                                          .WithIpu(x.variable->ipu())
                                          .WithOpName("shard"),
                                      DType::kInt32, TensorShape({2}));
      shards[x.variable] = shard;
      b_->weight_shards.push_back({x.variable, shard});
    }
  }
  b_->optimizer->set_update_shards(shards);
  Node* apply = b_->optimizer->ApplyGradients(ws, gv);
  b_->optimizer->set_update_shards({});
  if (!scope_.ok() || apply == nullptr) {
    violations_.push_back(absl::StrCat("the weight update failed to build: ",
                                       scope_.status().message()));
    return;
  }
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

void Builder::BuildOutfeed() {
  const PartDef& last = b_->stages.back().parts[0];
  if (b_->training) {
    if (o_.outfeed_queue == nullptr) return;
    if (o_.outfeed_loss) {
      b_->outfeed_values = {b_->loss};
    } else {
      b_->outfeed_values = last.outputs;
    }
  } else {
    // Inference: the last stage's outputs, of every concurrent part.
    for (const PartDef& p : b_->stages.back().parts) {
      b_->outfeed_values.insert(b_->outfeed_values.end(), p.outputs.begin(),
                                p.outputs.end());
    }
    if (o_.outfeed_queue == nullptr) {
      if (!b_->outfeed_values.empty()) {
        std::vector<std::string> names;
        for (const Output& o : b_->outfeed_values) names.push_back(o.name());
        violations_.push_back(
            absl::StrCat("the last computational stage has tensor outputs: ",
                         absl::StrJoin(names, ", "),
                         ", but no outfeed_queue has been "
                         "provided"));
      }
      return;
    }
  }
  if (b_->outfeed_values.empty()) return;
  // The last stage's last part enqueues (an ordinary node of its forward
  // program, on its IPU); the other parts' outputs reach it fed. Each
  // micro-batch is one push; a pipeline run's M pushes are one device
  // iteration of the output modes, summed with accumulate_outfeed.
  std::vector<PartDef>& parts = b_->stages.back().parts;
  PartDef& enqueuer = parts.back();
  for (size_t p = 0; p + 1 < parts.size(); ++p) {
    enqueuer.outfeed_feeds.insert(enqueuer.outfeed_feeds.end(),
                                  parts[p].outputs.begin(),
                                  parts[p].outputs.end());
  }
  std::vector<std::pair<std::string, Output>> named;
  if (o_.outfeed_loss) {
    named.push_back({"loss", b_->loss});
  } else {
    for (size_t i = 0; i < b_->outfeed_values.size(); ++i) {
      named.push_back({absl::StrCat(i), b_->outfeed_values[i]});
    }
  }
  Scope os = scope_.NewSubScope("outfeed").WithIpu(enqueuer.ipu);
  b_->outfeed_enqueue = o_.outfeed_queue->Enqueue(
      os, named,
      {o_.gradient_accumulation_count, /*sum=*/o_.accumulate_outfeed});
  if (!scope_.ok()) {
    violations_.push_back(std::string(scope_.status().message()));
    return;
  }
  b_->outfeed_id = o_.outfeed_queue->id();
}

absl::Status Builder::Build() {
  RETURN_IF_ERROR(scope_.status());
  b_->training = static_cast<bool>(o_.optimizer_function);
  b_->graph = scope_.graph_ptr();
  CheckOptions();
  const int n = num_stages();
  const auto error = [&] {
    return InvalidPipelineError(o_.pipeline_schedule, n, logical_mapping_,
                                o_.gradient_accumulation_count, b_->training,
                                violations_);
  };
  if (!mapping_ok_) {
    if (violations_.empty()) violations_.push_back("invalid device_mapping");
    return error();
  }
  b_->stages.resize(n);
  std::vector<ArgSpec> args = FirstStageArgs();
  for (int s = 0; s < n && scope_.ok(); ++s) {
    BuildStage(s, args);
    args.clear();
    for (const PartDef& p : b_->stages[s].parts) {
      for (size_t i = 0; i < p.outputs.size(); ++i) {
        if (!p.outputs[i].valid()) continue;
        args.push_back({p.outputs[i].dtype(), p.outputs[i].shape(),
                        absl::StrCat("output ", i, " of ", p.name)});
      }
    }
  }
  if (scope_.ok() && violations_.empty()) BuildOutfeed();
  if (b_->training && scope_.ok() && violations_.empty()) BuildWeightUpdate();
  RETURN_IF_ERROR(error());
  ASSIGN_OR_RETURN(b_->table,
                   MakeSchedule(o_.pipeline_schedule, n, logical_mapping_,
                                o_.gradient_accumulation_count, b_->training));
  return absl::OkStatus();
}

}  // namespace

Pipeline::Pipeline() = default;
Pipeline::~Pipeline() = default;

bool Pipeline::training() const { return built_->training; }
int Pipeline::num_stages() const {
  return static_cast<int>(built_->stages.size());
}
const ScheduleTable& Pipeline::table() const { return built_->table; }
int Pipeline::num_ipus() const {
  int n = 0;
  for (const StageDef& s : built_->stages) {
    for (const PartDef& p : s.parts) n = std::max(n, p.ipu + 1);
  }
  return n;
}

Node* Pipeline::frame() const { return built_->frame; }

std::optional<PipelineReport> Pipeline::last_report() const {
  return frame_->LastReport();
}

absl::StatusOr<std::unique_ptr<Pipeline>> Pipeline::Create(
    const Scope& scope, PipelineOptions options) {
  auto op = std::unique_ptr<Pipeline>(new Pipeline());
  op->built_ = std::make_unique<BuiltPipeline>();
  op->built_->options = std::move(options);
  Builder builder(scope, op->built_.get());
  RETURN_IF_ERROR(builder.Build());
  // From here on the queues are reached through the graph only.
  op->built_->options.infeed_queue = nullptr;
  op->built_->options.outfeed_queue = nullptr;
  // The frame node that runs the pipeline, beside Repeat: a graph holding it
  // compiles like any loop (strategy.Compile(graph, {}, {op->frame()})).
  op->frame_ = std::make_shared<PipelineDeviceFrame>(op->built_.get());
  ASSIGN_OR_RETURN(op->built_->frame, builder.BuildFrame(op->frame_));
  return op;
}

}  // namespace ipuflow::pipelining
