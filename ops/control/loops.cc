#include "ops/control/loops.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "core/graph.h"
#include "core/op_registry.h"

namespace ipuflow::loops {
namespace {

// A sub-graph built by a callback: the nodes with ids in [begin, end).
struct Frame {
  std::vector<std::string> args;
  std::vector<std::string> results;
  std::vector<std::string> targets;
  int begin = 0, end = 0;
};

std::vector<Output> MakeArgs(const Scope& s, const std::vector<Output>& like,
                             Frame* frame) {
  std::vector<Output> args;
  for (size_t i = 0; i < like.size(); ++i) {
    Node* n = s.WithOpName(absl::StrCat("arg", i))
                  .AddNode("_Arg", {},
                           {{"dtype", like[i].dtype()},
                            {"shape", like[i].shape()},
                            {"index", static_cast<int64_t>(i)}});
    if (n == nullptr) return {};
    frame->args.push_back(n->name());
    args.push_back(Output(n));
  }
  return args;
}

// The targets of the loops built inside [begin, end): they run in those
// loops (a loop nested in a body is in that body's id range, and so are
// the nodes of its own frames), not in every iteration of the outer one.
std::set<std::string> NestedTargets(const Graph& g, int begin, int end) {
  std::set<std::string> nested;
  for (int id = begin; id < end; ++id) {
    const Node* n = g.node(id);
    if (n->op() != "Repeat" && n->op() != "WhileLoop") continue;
    for (const char* attr : {"body_targets", "cond_targets"}) {
      if (!n->has_attr(attr)) continue;
      const auto& targets = n->attr<std::vector<std::string>>(attr);
      nested.insert(targets.begin(), targets.end());
    }
  }
  return nested;
}

// Stateful nodes of the frame run every iteration, used or not, except
// variable initialisers built in the body (and what only feeds them): those
// run once, from Initialize(); except the nodes of nested loops; and except
// variable reads (ResourceAccess::kRead), which have no effect but their
// value: a used read runs for its user, an unused one (the `value` read
// ops::Variable builds beside every variable, e.g. a gradient
// accumulator's) would copy the whole variable every iteration for nothing.
void CollectTargets(const Graph& g, Frame* frame) {
  const std::vector<Node*>& inits = g.collection("initializers");
  std::set<const Node*> init_set(inits.begin(), inits.end());
  const std::set<std::string> nested =
      NestedTargets(g, frame->begin, frame->end);
  std::map<const Node*, std::vector<const Node*>> consumers;
  for (int id = frame->begin; id < frame->end; ++id) {
    for (const Output& in : g.node(id)->inputs())
      consumers[in.node].push_back(g.node(id));
  }
  for (int id = frame->begin; id < frame->end; ++id) {
    const Node* n = g.node(id);
    if (!n->op_def().is_stateful() || n->op() == "_Arg" || init_set.count(n) ||
        n->op_def().resource_access() == ResourceAccess::kRead ||
        nested.count(n->name())) {
      continue;
    }
    const auto& users = consumers[n];
    const bool feeds_only_initializers =
        !users.empty() &&
        std::all_of(users.begin(), users.end(),
                    [&](const Node* u) { return init_set.count(u) > 0; });
    if (!feeds_only_initializers) frame->targets.push_back(n->name());
  }
}

// Outer outputs used inside the frames: loop-invariant inputs.
std::vector<Output> Captures(const Graph& g, int begin, int end) {
  std::vector<Output> captures;
  std::set<std::pair<int, int>> seen;
  for (int id = begin; id < end; ++id) {
    for (const Output& in : g.node(id)->inputs()) {
      if (in.node->id() < begin &&
          seen.insert({in.node->id(), in.index}).second) {
        captures.push_back(in);
      }
    }
  }
  return captures;
}

absl::Status CheckBodyOutputs(const std::string& loop,
                              const std::vector<Output>& inputs,
                              const std::vector<Output>& outputs) {
  if (outputs.size() != inputs.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(loop, ": the body returns ", outputs.size(),
                     " value(s) but the loop "
                     "carries ",
                     inputs.size(), "; it must return one per loop input"));
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!outputs[i].valid()) {
      return absl::InvalidArgumentError(
          absl::StrCat(loop, ": body output ", i, " is invalid"));
    }
    if (outputs[i].dtype() != inputs[i].dtype() ||
        !outputs[i].shape().IsCompatibleWith(inputs[i].shape())) {
      return absl::InvalidArgumentError(absl::StrCat(
          loop,
          ": mismatch between input types and output types for loop "
          "body: output ",
          i, " is ", DTypeName(outputs[i].dtype()),
          outputs[i].shape().DebugString(), " but input ", i, " is ",
          DTypeName(inputs[i].dtype()), inputs[i].shape().DebugString()));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Loop> BuildLoop(const Scope& scope, const std::string& op,
                               const LoopCondition* condition,
                               const LoopBody& body,
                               const std::vector<Output>& inputs,
                               InfeedSource* infeed, AttrMap attrs) {
  RETURN_IF_ERROR(scope.status());
  for (const Output& in : inputs) {
    if (!in.valid())
      return absl::InvalidArgumentError(op + ": a loop input is invalid");
  }
  Graph* g = scope.graph();
  const std::string loop_name = g->UniqueName(
      scope.prefix().empty() ? op : absl::StrCat(scope.prefix(), "/", op));
  const std::string rel_name =
      scope.prefix().empty() ? loop_name
                             : loop_name.substr(scope.prefix().size() + 1);
  const int begin = g->num_nodes();
  Scope inner = scope.WithNoControlDependencies();
  Frame cond_frame, body_frame;
  if (condition != nullptr) {
    Scope cs = inner.NewSubScope(rel_name + "_cond");
    cond_frame.begin = g->num_nodes();
    std::vector<Output> args = MakeArgs(cs, inputs, &cond_frame);
    Output pred = (*condition)(cs, args);
    RETURN_IF_ERROR(scope.status());
    if (!pred.valid() || pred.dtype() != DType::kBool ||
        pred.shape().rank() != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          op, " '", loop_name, "': the condition must return a bool scalar"));
    }
    cond_frame.results.push_back(pred.name());
    cond_frame.end = g->num_nodes();
    CollectTargets(*g, &cond_frame);
  }
  Scope bs = inner.NewSubScope(rel_name + "_body");
  body_frame.begin = g->num_nodes();
  std::vector<Output> args = MakeArgs(bs, inputs, &body_frame);
  RETURN_IF_ERROR(scope.status());
  if (infeed != nullptr) {
    ASSIGN_OR_RETURN(std::vector<Output> element, infeed->BuildDequeue(bs));
    args.insert(args.end(), element.begin(), element.end());
  }
  std::vector<Output> outputs = body(bs, args);
  RETURN_IF_ERROR(scope.status());
  const std::string where = absl::StrCat(op, " '", loop_name, "'");
  RETURN_IF_ERROR(CheckBodyOutputs(where, inputs, outputs));
  for (const Output& o : outputs) body_frame.results.push_back(o.name());
  body_frame.end = g->num_nodes();
  CollectTargets(*g, &body_frame);

  std::vector<Output> loop_inputs = inputs;
  const std::vector<Output> captures = Captures(*g, begin, g->num_nodes());
  loop_inputs.insert(loop_inputs.end(), captures.begin(), captures.end());
  attrs["num_loop_vars"] = static_cast<int64_t>(inputs.size());
  attrs["body_args"] = body_frame.args;
  attrs["body_results"] = body_frame.results;
  attrs["body_targets"] = body_frame.targets;
  if (condition != nullptr) {
    attrs["cond_args"] = cond_frame.args;
    attrs["cond_result"] = cond_frame.results[0];
    attrs["cond_targets"] = cond_frame.targets;
  }
  NodeSpec spec;
  spec.op = op;
  spec.name = loop_name;
  spec.inputs = std::move(loop_inputs);
  spec.attrs = std::move(attrs);
  spec.ipu = scope.ipu();
  spec.block = scope.block();
  absl::StatusOr<Node*> added = g->AddNode(std::move(spec));
  if (!added.ok()) {
    scope.UpdateStatus(added.status());
    return added.status();
  }
  Node* node = *added;
  Loop loop;
  loop.op = node;
  for (size_t i = 0; i < inputs.size(); ++i)
    loop.outputs.push_back(Output(node, i));
  return loop;
}

}  // namespace

absl::StatusOr<Loop> Repeat(const Scope& scope, int64_t n, const LoopBody& body,
                            const std::vector<Output>& inputs,
                            InfeedSource* infeed) {
  if (n < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("Repeat: the iteration count must be >= 0, got ", n));
  }
  return BuildLoop(scope, "Repeat", nullptr, body, inputs, infeed, {{"n", n}});
}

absl::StatusOr<Loop> WhileLoop(const Scope& scope,
                               const LoopCondition& condition,
                               const LoopBody& body,
                               const std::vector<Output>& inputs,
                               InfeedSource* infeed,
                               int64_t maximum_iterations) {
  return BuildLoop(scope, "WhileLoop", &condition, body, inputs, infeed,
                   {{"maximum_iterations", maximum_iterations}});
}

}  // namespace ipuflow::loops
