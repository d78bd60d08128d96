#include "optimizers/optimizer.h"

#include <cmath>
#include <limits>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/gradients.h"
#include "core/option_checks.h"
#include "ops/array/const.h"
#include "ops/math/cast.h"
#include "ops/state/assign.h"
#include "ops/state/initializers.h"
#include "ops/state/no_op.h"
#include "ops/state/read_variable.h"

namespace ipuflow::optimizers {
namespace {

// Nodes the loss depends on through data edges (gradients flow only there).
std::vector<bool> Ancestors(const Output& loss) {
  const Graph& g = *loss.node->graph();
  std::vector<bool> needed(g.num_nodes(), false);
  needed[loss.node->id()] = true;
  for (int id = loss.node->id(); id >= 0; --id) {
    if (!needed[id]) continue;
    for (const Output& in : g.node(id)->inputs()) needed[in.node->id()] = true;
  }
  return needed;
}

// `name` without the scope's prefix, so nodes named after it stay in scope.
std::string LocalName(const Scope& scope, const std::string& name) {
  const std::string& p = scope.prefix();
  if (!p.empty() && name.size() > p.size() &&
      name.compare(0, p.size(), p) == 0 && name[p.size()] == '/') {
    return name.substr(p.size() + 1);
  }
  return name;
}

// For each variable of `vars`, its ReadVariable outputs the loss depends on.
// Variables are keyed by resource name: two Variable nodes may share one
// variable (the first in `vars` gets the reads).
std::vector<std::vector<Output>> ReadsInLoss(const Output& loss,
                                             const std::vector<Node*>& vars) {
  absl::flat_hash_map<std::string, size_t> index;
  for (size_t i = 0; i < vars.size(); ++i) {
    index.try_emplace(ops::GetVariableInfo(Output(vars[i]))->name, i);
  }
  std::vector<std::vector<Output>> reads(vars.size());
  const std::vector<bool> needed = Ancestors(loss);
  const Graph& g = *loss.node->graph();
  for (int id = 0; id < static_cast<int>(needed.size()); ++id) {
    Node* n = g.node(id);
    if (!needed[id] || n->op() != "ReadVariable") continue;
    absl::StatusOr<ops::VariableInfo> info = ops::GetVariableInfo(n->input(0));
    if (!info.ok() || !IsDifferentiable(info->dtype)) continue;
    auto it = index.find(info->name);
    if (it != index.end()) reads[it->second].push_back(Output(n));
  }
  return reads;
}

// The value `var`'s initializer assigns (ops::Variable's "<name>/Assign" in
// the "initializers" collection); invalid when it has none.
Output InitialValue(const ops::VariableInfo& var) {
  for (const Node* init : var.node->graph()->collection("initializers")) {
    if (init->num_inputs() == 2 && init->input(0).node == var.node) {
      return init->input(1);
    }
  }
  return Output();
}

std::string NodeNames(const std::vector<Node*>& nodes) {
  std::vector<std::string> names;
  for (const Node* n : nodes)
    names.push_back(absl::StrCat("'", n->name(), "'"));
  return absl::StrJoin(names, ", ");
}

}  // namespace

Output Hyperparameter::ToOutput(const Scope& scope, const std::string& owner,
                                const char* field) const {
  if (const float* v = std::get_if<float>(&value_)) {
    OptionChecker check(owner);
    check.FiniteRange(field, *v, 0, std::numeric_limits<float>::max());
    if (!check.ok()) {
      scope.UpdateStatus(check.status());
      return Output();
    }
    return ops::Const(scope, *v);
  }
  return std::get<Output>(value_);  // The op that reads it checks it.
}

OptionRules& OptionRules::NonNegative(const char* field, float value) {
  if (!(std::isfinite(value) && value >= 0)) {
    check_.Fail(absl::StrCat(field, " is ", value,
                             "; it must be a finite number >= 0"));
  }
  return *this;
}

OptionRules& OptionRules::Between(const char* field, float value, float lo,
                                  float hi) {
  check_.FiniteRange(field, value, lo, hi);
  return *this;
}

OptionRules& OptionRules::Decay(const char* field, float value) {
  if (value == 1) {
    check_.Fail(absl::StrCat(field,
                             " is 1; it must be in [0, 1) (1 makes the bias "
                             "correction 1 - ",
                             field, "^t zero)"));
  } else {
    check_.FiniteRange(field, value, 0, 1);
  }
  return *this;
}

OptionRules& OptionRules::Fail(const std::string& message) {
  check_.Fail(message);
  return *this;
}

bool OptionRules::Record(const Scope& scope) const {
  if (check_.ok()) return true;
  scope.UpdateStatus(check_.status());
  return false;
}

absl::Status CheckLossDType(const Output& loss) {
  if (IsFloating(loss.dtype())) return absl::OkStatus();
  // An integer loss has no gradient: Minimize would build an update of
  // zeros, or none, and report success (issue 22).
  return absl::InvalidArgumentError(
      absl::StrCat("the loss '", loss.name(), "' is ", DTypeName(loss.dtype()),
                   "; a loss to minimize must be float32 or float16"));
}

std::vector<GradAndVar> Optimizer::ComputeGradients(const Scope& scope,
                                                    Output loss,
                                                    const VarList& var_list) {
  if (!scope.ok()) return {};
  auto fail = [&](const absl::Status& s) {
    scope.UpdateStatus(absl::Status(
        s.code(), absl::StrCat(name_, " optimizer: ", s.message())));
    return std::vector<GradAndVar>();
  };
  if (!loss.valid()) {
    return fail(absl::InvalidArgumentError(
        "the loss is invalid (built from an earlier failed op)"));
  }
  if (loss.node->graph() != scope.graph()) {
    return fail(absl::InvalidArgumentError(absl::StrCat(
        "the loss '", loss.name(), "' is not in the scope's graph")));
  }
  if (absl::Status s = CheckLossDType(loss); !s.ok()) return fail(s);
  absl::StatusOr<std::vector<Node*>> vars = var_list.Resolve(*scope.graph());
  if (!vars.ok()) return fail(vars.status());
  const std::vector<std::vector<Output>> reads = ReadsInLoss(loss, *vars);
  std::vector<Output> xs;
  for (const auto& r : reads) xs.insert(xs.end(), r.begin(), r.end());
  if (xs.empty()) {
    return fail(absl::InvalidArgumentError(
        absl::StrCat("the loss '", loss.name(),
                     "' reads none of the variables ", NodeNames(*vars))));
  }
  std::vector<Output> grads;
  absl::Status s = AddGradients(scope, {loss}, xs, {}, &grads);
  if (!s.ok()) return fail(s);
  std::vector<GradAndVar> out;
  size_t next = 0;
  for (size_t i = 0; i < vars->size(); ++i) {
    std::vector<Output> terms(grads.begin() + next,
                              grads.begin() + next + reads[i].size());
    next += reads[i].size();
    Output grad;
    if (!terms.empty()) {
      grad = AddTerms(scope.WithOpName(absl::StrCat(
                          LocalName(scope, (*vars)[i]->name()), "/grad")),
                      terms);
    }
    out.push_back({grad, (*vars)[i]});
  }
  return scope.ok() ? out : std::vector<GradAndVar>();
}

Node* Optimizer::ApplyGradients(const Scope& scope,
                                const std::vector<GradAndVar>& grads_and_vars) {
  if (!scope.ok()) return nullptr;
  auto fail = [&](const absl::Status& s) -> Node* {
    scope.UpdateStatus(absl::Status(
        s.code(), absl::StrCat(name_, " optimizer: ", s.message())));
    return nullptr;
  };
  std::vector<std::pair<Output, ops::VariableInfo>> todo;
  std::vector<Node*> skipped;
  for (const GradAndVar& gv : grads_and_vars) {
    absl::StatusOr<ops::VariableInfo> info =
        ops::GetVariableInfo(Output(gv.variable));
    if (!info.ok()) return fail(info.status());
    if (gv.grad.valid()) {
      todo.push_back({gv.grad, *info});
    } else {
      skipped.push_back(gv.variable);
    }
  }
  if (todo.empty()) {
    return fail(absl::InvalidArgumentError(
        absl::StrCat("no gradient for any variable (", NodeNames(skipped),
                     "): does the loss depend on them?")));
  }
  const Scope opt_scope = scope.NewSubScope(name_);
  std::vector<Node*> deps = Prepare(opt_scope);
  // ApplyDense reads update_shard(): each variable's own while it builds
  // (set_update_shards), so a master's update takes its weight's shard.
  const Output shard = update_shard_;
  for (const auto& [grad, var] : todo) {
    const Scope update_scope =
        opt_scope.WithIpu(var.node->ipu())
            .WithOpName(absl::StrCat("update_", var.node->name()));
    update_shard_ = UpdateShardOf(var.node);
    if (master_weights_ && var.dtype == DType::kFloat16) {
      deps.push_back(ApplyThroughMaster(scope, update_scope, grad, var));
    } else {
      std::vector<Output> slots;
      for (const std::string& slot : SlotNames()) {
        slots.push_back(MakeSlot(scope, var, slot, var.dtype));
      }
      deps.push_back(ApplyDense(update_scope, grad, var, slots));
    }
    update_shard_ = shard;
  }
  if (!scope.ok()) return nullptr;
  return ops::Group(opt_scope.WithOpName("apply"), deps);
}

DType Optimizer::GradientDType(const ops::VariableInfo& var) const {
  return master_weights_ && var.dtype == DType::kFloat16 ? DType::kFloat32
                                                         : var.dtype;
}

Output Optimizer::MakeSlot(const Scope& scope, const ops::VariableInfo& var,
                           const std::string& slot, DType dtype) const {
  const std::string name =
      absl::StrCat(LocalName(scope, var.node->name()), "/", name_, "/", slot);
  const Scope s = scope.WithIpu(var.node->ipu());
  Output zeros = ops::Zeros(s.WithOpName(name + "/Zeros"), var.shape, dtype);
  return ops::Variable(s.WithOpName(name), zeros,
                       {/*shared_name=*/"", /*trainable=*/false})
      .handle;
}

absl::StatusOr<ops::VariableInfo> Optimizer::MakeMaster(
    const Scope& scope, const ops::VariableInfo& var) const {
  const Output initial = InitialValue(var);
  if (!initial.valid()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "master weights: variable '", var.name,
        "' has no initializer to initialise its float32 master from (create "
        "it with ops::Variable(scope, initial_value))"));
  }
  const std::string name =
      absl::StrCat(LocalName(scope, var.node->name()), "/", name_, "/master");
  const Scope s = scope.WithIpu(var.node->ipu());
  // Widening float16 to float32 is exact: the master starts equal to var.
  Output init = ops::Cast(s.WithOpName(name + "/initial_value"), initial,
                          DType::kFloat32);
  ops::VariableHandle master = ops::Variable(
      s.WithOpName(name), init, {/*shared_name=*/"", /*trainable=*/false});
  RETURN_IF_ERROR(scope.status());
  return ops::GetVariableInfo(master.handle);
}

Node* Optimizer::ApplyThroughMaster(const Scope& scope,
                                    const Scope& update_scope, Output grad,
                                    const ops::VariableInfo& var) {
  absl::StatusOr<ops::VariableInfo> master = MakeMaster(scope, var);
  if (!master.ok()) {
    scope.UpdateStatus(absl::Status(
        master.status().code(),
        absl::StrCat(name_, " optimizer: ", master.status().message())));
    return nullptr;
  }
  std::vector<Output> slots;
  for (const std::string& slot : SlotNames()) {
    slots.push_back(MakeSlot(scope, var, slot, DType::kFloat32));
  }
  const std::string name =
      absl::StrCat(LocalName(scope, var.node->name()), "/", name_, "/master");
  const Scope s = scope.WithIpu(var.node->ipu());
  if (grad.dtype() != DType::kFloat32) {
    grad = ops::Cast(s.WithOpName(name + "/grad"), grad, DType::kFloat32);
  }
  Node* update = ApplyDense(update_scope, grad, *master, slots);
  if (update == nullptr) return nullptr;
  // The new master value, rounded once into the variable the model reads.
  Output value = ops::ReadVariable(
      s.WithOpName(name + "/value").WithControlDependencies({update}),
      Output(master->node));
  return ops::Assign(
      s.WithOpName(name + "/copy"), Output(var.node),
      ops::Cast(s.WithOpName(name + "/to_float16"), value, DType::kFloat16));
}

Node* Optimizer::Minimize(const Scope& scope, Output loss,
                          const VarList& var_list) {
  std::vector<GradAndVar> grads = ComputeGradients(scope, loss, var_list);
  if (!scope.ok()) return nullptr;
  return ApplyGradients(scope, grads);
}

}  // namespace ipuflow::optimizers
