// Compiler phase 0, spec check: every feed, fetch and target of a
// ProgramSpec belongs to the graph, and every feed shape is fully defined
// and compatible with its output. Errors name the handle.
//
// Output: the feeds by output (their index in spec.feeds), which the later
// phases use to cut the graph at fed values.
#ifndef IPUFLOW_CORE_COMPILER_SPEC_CHECK_H_
#define IPUFLOW_CORE_COMPILER_SPEC_CHECK_H_

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "core/graph.h"
#include "core/program_spec.h"

namespace ipuflow::compiler {

using FeedIndex = absl::flat_hash_map<Output, int>;

absl::StatusOr<FeedIndex> CheckSpec(const Graph& graph,
                                    const ProgramSpec& spec);

}  // namespace ipuflow::compiler

#endif  // IPUFLOW_CORE_COMPILER_SPEC_CHECK_H_
