#include "optimizers/var_list.h"

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ops/state/variable.h"
#include "re2/re2.h"

namespace ipuflow::optimizers {
namespace {

// "'a', 'b', 'c'", at most 10 names.
std::string Names(const std::vector<Node*>& nodes) {
  std::vector<std::string> names;
  for (size_t i = 0; i < nodes.size() && i < 10; ++i) {
    names.push_back(absl::StrCat("'", nodes[i]->name(), "'"));
  }
  if (nodes.size() > 10) names.push_back("...");
  return names.empty() ? "none" : absl::StrJoin(names, ", ");
}

absl::StatusOr<std::vector<Node*>> Match(const std::string& pattern,
                                         const std::vector<Node*>& trainable) {
  RE2 re(pattern, RE2::Quiet);
  if (!re.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "VarList::Matching: invalid pattern '", pattern, "': ", re.error()));
  }
  std::vector<Node*> out;
  for (Node* n : trainable) {
    if (RE2::FullMatch(n->name(), re)) out.push_back(n);
  }
  if (out.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "VarList::Matching: pattern '", pattern,
        "' (full match) matches no trainable variable; the trainable "
        "variables are ",
        Names(trainable)));
  }
  return out;
}

}  // namespace

VarList VarList::Of(std::vector<Node*> variables) {
  VarList v;
  v.kind_ = Kind::kExplicit;
  v.variables_ = std::move(variables);
  return v;
}

VarList VarList::Of(const std::vector<ops::VariableHandle>& variables) {
  std::vector<Node*> nodes;
  for (const ops::VariableHandle& h : variables) nodes.push_back(h.handle.node);
  return Of(std::move(nodes));
}

VarList VarList::Matching(std::string pattern) {
  VarList v;
  v.kind_ = Kind::kMatching;
  v.pattern_ = std::move(pattern);
  return v;
}

absl::StatusOr<std::vector<Node*>> VarList::Resolve(const Graph& graph) const {
  const std::vector<Node*>& trainable = graph.collection("trainable_variables");
  std::vector<Node*> candidates;
  switch (kind_) {
    case Kind::kTrainable:
      candidates = trainable;
      break;
    case Kind::kMatching: {
      ASSIGN_OR_RETURN(candidates, Match(pattern_, trainable));
      break;
    }
    case Kind::kExplicit:
      candidates = variables_;
      break;
  }
  std::vector<Node*> out;
  absl::flat_hash_set<Node*> seen;
  for (size_t i = 0; i < candidates.size(); ++i) {
    Node* n = candidates[i];
    if (n == nullptr || n->graph() != &graph || !ops::IsVariable(n)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "var_list entry ", i, " (", n == nullptr ? "null" : n->DebugName(),
          ") is not a Variable node of this graph"));
    }
    if (seen.insert(n).second) out.push_back(n);
  }
  if (out.empty()) {
    return absl::InvalidArgumentError(
        "the var_list is empty: the graph has no trainable variables (build "
        "them with ops::Variable) or the explicit list was empty");
  }
  return out;
}

}  // namespace ipuflow::optimizers
