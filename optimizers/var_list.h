// VarList: which variables an optimizer trains. By default every variable in
// the graph's "trainable_variables" collection; or an explicit list; or the
// trainable variables whose node name matches an RE2 pattern (full match).
//
//   opt.Minimize(scope, loss);                                   // all
//   opt.Minimize(scope, loss, VarList::Of({w.handle.node}));     // just w
//   opt.Minimize(scope, loss, VarList::Matching("dense_[0-9]+/.*"));
//
// A VarList is a value; Resolve reads the graph and is safe while no thread
// modifies it.
#ifndef IPUFLOW_OPTIMIZERS_VAR_LIST_H_
#define IPUFLOW_OPTIMIZERS_VAR_LIST_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/graph.h"
#include "ops/state/variable.h"

namespace ipuflow::optimizers {

class VarList {
 public:
  // The trainable variables.
  VarList() = default;
  static VarList Trainable() { return VarList(); }
  // Exactly these Variable nodes (trainable or not), duplicates dropped.
  static VarList Of(std::vector<Node*> variables);
  static VarList Of(const std::vector<ops::VariableHandle>& variables);
  // The trainable variables whose node name fully matches `pattern` (RE2
  // syntax, e.g. "dense_[0-9]+/.*").
  static VarList Matching(std::string pattern);

  // The Variable nodes, in order, without duplicates. InvalidArgument for a
  // bad pattern or one that matches no trainable variable (naming the
  // pattern and the trainable variables), for a node that is not a Variable
  // of `graph`, and for an empty result.
  absl::StatusOr<std::vector<Node*>> Resolve(const Graph& graph) const;

 private:
  enum class Kind { kTrainable, kExplicit, kMatching };
  Kind kind_ = Kind::kTrainable;
  std::vector<Node*> variables_;  // kExplicit.
  std::string pattern_;           // kMatching.
};

}  // namespace ipuflow::optimizers

#endif  // IPUFLOW_OPTIMIZERS_VAR_LIST_H_
