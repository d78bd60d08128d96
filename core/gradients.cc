#include "core/gradients.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "core/op_registry.h"

namespace ipuflow {

Output AddTerms(const Scope& scope, const std::vector<Output>& terms) {
  if (terms.size() == 1) return terms[0];
  return Output(scope.AddNode("AddN", terms, {}, "AddN"));
}

absl::Status AddGradients(const Scope& scope, const std::vector<Output>& ys,
                          const std::vector<Output>& xs,
                          const std::vector<Output>& grad_ys,
                          std::vector<Output>* grad_xs) {
  RETURN_IF_ERROR(scope.status());
  Graph* g = scope.graph();
  if (!grad_ys.empty() && grad_ys.size() != ys.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "AddGradients: ", ys.size(), " ys but ", grad_ys.size(), " grad_ys"));
  }
  for (const Output& o : ys) {
    if (!o.valid())
      return absl::InvalidArgumentError("AddGradients: a y is invalid");
  }
  for (const Output& o : xs) {
    if (!o.valid())
      return absl::InvalidArgumentError("AddGradients: an x is invalid");
    if (!IsDifferentiable(o.dtype())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "AddGradients: x '", o.name(), "' is ", DTypeName(o.dtype()),
          "; only float tensors have gradients"));
    }
  }
  const int n = g->num_nodes();
  // Nodes that depend on some x, and nodes some y depends on.
  absl::flat_hash_set<Output> x_set(xs.begin(), xs.end());
  std::vector<bool> from_x(n, false), to_y(n, false);
  for (int id = 0; id < n; ++id) {
    for (const Output& in : g->node(id)->inputs()) {
      if (x_set.count(in) || from_x[in.node->id()]) from_x[id] = true;
    }
  }
  for (const Output& y : ys) to_y[y.node->id()] = true;
  for (int id = n - 1; id >= 0; --id) {
    if (!to_y[id]) continue;
    for (const Output& in : g->node(id)->inputs()) to_y[in.node->id()] = true;
  }

  absl::flat_hash_map<Output, std::vector<Output>> pending;
  Scope gs = scope.NewSubScope("gradients");
  for (size_t i = 0; i < ys.size(); ++i) {
    Output seed =
        grad_ys.empty()
            ? Output(gs.WithIpu(ys[i].node->ipu())
                         .AddNode("OnesLike", {ys[i]}, {}, "OnesLike"))
            : grad_ys[i];
    pending[ys[i]].push_back(seed);
  }
  for (int id = n - 1; id >= 0; --id) {
    if (!(from_x[id] && to_y[id])) continue;
    Node* node = g->node(id);
    std::vector<Output> dy(node->num_outputs());
    bool any = false;
    Scope ns = gs.NewSubScope(node->name())
                   .WithIpu(node->ipu())
                   .WithBlock(node->block());
    for (int k = 0; k < node->num_outputs(); ++k) {
      auto it = pending.find(Output(node, k));
      if (it == pending.end() || !IsDifferentiable(node->output_dtype(k)))
        continue;
      dy[k] = AddTerms(ns, it->second);
      any = true;
    }
    if (!any) continue;
    const OpDef& def = node->op_def();
    if (!def.has_gradient()) {
      if (!def.not_differentiable_reason().empty()) continue;
      return absl::UnimplementedError(
          absl::StrCat("no gradient is defined for ", node->DebugName(),
                       " (on the path from the xs to the ys)"));
    }
    std::vector<Output> dx;
    RETURN_IF_ERROR(def.gradient()(ns, *node, dy, &dx));
    RETURN_IF_ERROR(scope.status());
    if (static_cast<int>(dx.size()) != node->num_inputs()) {
      return absl::InternalError(absl::StrCat(
          "gradient of ", node->DebugName(), " returned ", dx.size(),
          " gradients for ", node->num_inputs(), " inputs"));
    }
    for (int i = 0; i < node->num_inputs(); ++i) {
      const Output& in = node->input(i);
      if (!dx[i].valid() || !IsDifferentiable(in.dtype())) continue;
      if (from_x[in.node->id()] || x_set.count(in))
        pending[in].push_back(dx[i]);
    }
  }
  grad_xs->clear();
  for (const Output& x : xs) {
    auto it = pending.find(x);
    if (it == pending.end()) {
      grad_xs->push_back(
          Output(gs.WithIpu(x.node->ipu())
                     .AddNode("ZerosLike", {x}, {}, "ZerosLike")));
    } else {
      // Summed where the contributions were computed (x may be unplaced).
      grad_xs->push_back(
          AddTerms(gs.WithIpu(it->second[0].node->ipu()), it->second));
    }
  }
  return scope.status();
}

}  // namespace ipuflow
