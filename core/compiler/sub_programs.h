// Compiler phase 7, sub-programs: the memory of the programs a node's kernel
// runs (device loop bodies and conditions; ops registered with
// SetSubPrograms), planned for the node's input shapes. Their constants and
// variables are always-live in this program; their arena peak is live while
// the node runs, on top of the values live there (memory_report.h adds it).
// A node whose input shapes are not all known is skipped: its kernel plans
// its programs when it runs.
//
// Input: the schedule, values, shapes, a function compiling a sub-program
// spec to its per-shard MemoryPlans (Program::Compile, recursively), and the
// always-live shards (always_live.h), to which the bodies' constants and
// variables not already counted are added.
// Output: per such node, the peak its sub-programs need on each shard.
#ifndef IPUFLOW_CORE_COMPILER_SUB_PROGRAMS_H_
#define IPUFLOW_CORE_COMPILER_SUB_PROGRAMS_H_

#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "core/compiler/schedule.h"
#include "core/compiler/shapes.h"
#include "core/compiler/values.h"
#include "core/memory_plan.h"
#include "core/program_spec.h"

namespace ipuflow::compiler {

struct SubProgramNeed {
  int pos;                    // The node running the sub-programs.
  std::vector<int64_t> peak;  // Per shard of this program.
  std::vector<bool> uses;     // Shards the sub-programs put anything on.
};

using PlanMemoryFn =
    std::function<absl::StatusOr<std::vector<MemoryPlan>>(const ProgramSpec&)>;

absl::StatusOr<std::vector<SubProgramNeed>> PlanSubPrograms(
    const Schedule& schedule, const Values& values, const ValueTypes& types,
    const PlanMemoryFn& plan_memory, std::vector<MemoryPlan>* shards);

}  // namespace ipuflow::compiler

#endif  // IPUFLOW_CORE_COMPILER_SUB_PROGRAMS_H_
