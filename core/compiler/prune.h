// Compiler phase 1, prune: the nodes a program needs. A node is needed if
// it is a target, produces a fetch that is not fed, or is an input or a
// control input of a needed node, except through a fed output (a feed cuts
// the graph there).
//
// Input: a checked spec and its feeds (spec_check.h).
// Output: per node id, whether the program runs it.
#ifndef IPUFLOW_CORE_COMPILER_PRUNE_H_
#define IPUFLOW_CORE_COMPILER_PRUNE_H_

#include <vector>

#include "core/compiler/spec_check.h"
#include "core/graph.h"
#include "core/program_spec.h"

namespace ipuflow::compiler {

std::vector<bool> Prune(const Graph& graph, const ProgramSpec& spec,
                        const FeedIndex& feeds);

}  // namespace ipuflow::compiler

#endif  // IPUFLOW_CORE_COMPILER_PRUNE_H_
