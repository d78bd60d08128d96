// Compiler phase 7, sub-programs: the programs a node's kernel runs (device
// loop bodies and conditions; ops registered with SetSubPrograms), compiled
// once for the node's input shapes, and their memory. The caller keeps each
// compiled program for the node's kernel (Program::Compile hands it over
// through the node's SubPrograms state), so the plan and what runs are the
// same program. Their constants and
// variables are always-live in this program; their arena peak is live while
// the node runs, on top of the values live there (memory_report.h adds it).
// A node whose input shapes are not all known is skipped: its kernel plans
// its programs when it runs. A sub-program that runs on the replica's own
// IPUs (SubProgramSpec::own_ipus: a pipeline frame's parts) counts shard k
// on this program's shard k, adding shards as needed; others count the
// shards this program does not have on their node's. Buffers the kernel
// holds (a pipeline's stash and FIFOs) join the shard they are held on.
//
// Input: the node order, values, shapes, the program's spec (its compile
// options go to the nodes' SubProgramsFn), a function compiling node `pos`'s
// sub-program and returning its per-shard MemoryPlans (Program::Compile,
// recursively, keeping the program), and the
// always-live shards (always_live.h), to which the bodies' constants and
// variables not already counted are added.
// Output: per such node, the peak its sub-programs need on each shard.
#ifndef IPUFLOW_CORE_COMPILER_SUB_PROGRAMS_H_
#define IPUFLOW_CORE_COMPILER_SUB_PROGRAMS_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/compiler/node_order.h"
#include "core/compiler/shapes.h"
#include "core/compiler/values.h"
#include "core/memory_plan.h"
#include "core/program_spec.h"

namespace ipuflow::compiler {

struct SubProgramNeed {
  int pos;                    // The node running the sub-programs.
  std::vector<int64_t> peak;  // Per shard of this program.
  std::vector<bool> uses;     // Shards the sub-programs put anything on.
  // Per shard, the role of the sub-program that peaks highest there, when
  // the node has several that run on different IPUs (own_ipus).
  std::vector<std::string> largest_role;
};

// Compiles the sub-program `sub` of the node at node order position `pos`;
// called once per sub-program, in node order then role order.
using CompileSubProgramFn =
    std::function<absl::StatusOr<std::vector<MemoryPlan>>(
        int pos, const SubProgramSpec& sub)>;

absl::StatusOr<std::vector<SubProgramNeed>> PlanSubPrograms(
    const NodeOrder& order, const Values& values, const ValueTypes& types,
    const ProgramSpec& spec, const CompileSubProgramFn& compile,
    std::vector<MemoryPlan>* shards);

}  // namespace ipuflow::compiler

#endif  // IPUFLOW_CORE_COMPILER_SUB_PROGRAMS_H_
