// Compiler phase 4, dependencies: which nodes must finish before each node
// starts. Data and control edges, plus the order of accesses to each
// variable as built (TF2's automatic control dependencies): an access waits
// for the last write before it, and a write also waits for every read since
// that write. Variables are keyed by shared_name when set, so nodes of
// variables that share one are ordered too.
//
// Input: the node order and its values.
// Output: the predecessors of every position (all lower positions) and the
// names of the variables the program touches.
#ifndef IPUFLOW_CORE_COMPILER_DEPENDENCIES_H_
#define IPUFLOW_CORE_COMPILER_DEPENDENCIES_H_

#include <set>
#include <string>
#include <vector>

#include "core/compiler/node_order.h"
#include "core/compiler/values.h"

namespace ipuflow::compiler {

struct Dependencies {
  std::vector<std::set<int>> preds;    // By position.
  std::vector<std::string> variables;  // Sorted.
};

Dependencies FindDependencies(const NodeOrder& order, const Values& values);

}  // namespace ipuflow::compiler

#endif  // IPUFLOW_CORE_COMPILER_DEPENDENCIES_H_
