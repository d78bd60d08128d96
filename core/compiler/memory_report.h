// Compiler phase 10, memory report: the MemoryPlan of each shard and of the
// whole program, from what the earlier phases found. A shard's peak is its
// arena region, or, if higher, a sub-program's peak on top of the highest
// byte in use at its node (the sub-program's own arena is not part of this
// program's arena, but its memory is needed at the same time).
//
// Input: the always-live shards (always_live.h, with sub_programs.h's
// additions), the sub-program needs, the liveness and the arena layout.
// Output: per shard and total MemoryPlans.
#ifndef IPUFLOW_CORE_COMPILER_MEMORY_REPORT_H_
#define IPUFLOW_CORE_COMPILER_MEMORY_REPORT_H_

#include <vector>

#include "core/compiler/liveness.h"
#include "core/compiler/node_order.h"
#include "core/compiler/offsets.h"
#include "core/compiler/sub_programs.h"
#include "core/memory_plan.h"

namespace ipuflow::compiler {

struct MemoryReport {
  MemoryPlan total;
  std::vector<MemoryPlan> shards;
};

MemoryReport ReportMemory(const NodeOrder& order,
                          std::vector<MemoryPlan> always_live,
                          const std::vector<SubProgramNeed>& sub_programs,
                          const Liveness& liveness, const ArenaLayout& layout);

}  // namespace ipuflow::compiler

#endif  // IPUFLOW_CORE_COMPILER_MEMORY_REPORT_H_
