// Builder, forward: the stages' parts in the graph (arguments, captures,
// variables), the outfeed, the frame node; Build() runs every phase
// (pipeline_builder.h).
#include "pipelining/pipeline_builder.h"

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
#include "pipelining/validation.h"

namespace ipuflow::pipelining::internal {

std::string ShapeStr(const ArgSpec& a) {
  return absl::StrCat(DTypeName(a.dtype), a.shape.DebugString());
}

absl::StatusOr<Node*> Builder::BuildFrame(
    std::shared_ptr<PipelineDeviceFrame> frame) {
  // The host resource id: unique in the process, so in the graph too.
  static std::atomic<uint64_t> next_id{1};
  const uint64_t id = next_id.fetch_add(1, std::memory_order_relaxed);
  return ops::PipelineFrame(
      scope_, absl::StrCat("pipeline frame ", id, " '", o_.name, "'"),
      std::move(frame), o_.inputs);
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
    // Several parts may read one (tied weights): all on its IPU (checked
    // with the placement), each accumulating its share of the gradient.
    if (!trainable.count(var) || !seen.insert(var).second) continue;
    part.variables.push_back(var);
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
  if (o_.schedule_table.has_value()) {
    b_->table = *o_.schedule_table;  // Checked in CheckScheduleTable.
  } else {
    ASSIGN_OR_RETURN(
        b_->table, MakeSchedule(o_.pipeline_schedule, n, logical_mapping_,
                                o_.gradient_accumulation_count, b_->training));
  }
  return absl::OkStatus();
}

}  // namespace ipuflow::pipelining::internal
