// Compiler phase 11, ordering: the edges that make arena reuse safe when
// nodes run in parallel. If value B takes bytes value A used and A's
// lifetime ends before B's starts, B's producer must wait for every consumer
// of A (and of A's aliases), or for an A nobody reads, for A's producer;
// each such edge goes from a lower position to a higher one, so the node
// order stays a topological order.
//
// Input: the intervals with offsets (offsets.h), the liveness (consumers)
// and the values (producers).
// Output: the edges (from, to) as positions; some may duplicate data edges.
#ifndef IPUFLOW_CORE_COMPILER_ORDERING_H_
#define IPUFLOW_CORE_COMPILER_ORDERING_H_

#include <set>
#include <utility>
#include <vector>

#include "core/compiler/liveness.h"
#include "core/compiler/values.h"

namespace ipuflow::compiler {

std::set<std::pair<int, int>> ReuseEdges(const Liveness& liveness,
                                         const Values& values);

}  // namespace ipuflow::compiler

#endif  // IPUFLOW_CORE_COMPILER_ORDERING_H_
