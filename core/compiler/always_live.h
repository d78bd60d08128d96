// Compiler phase 6, always-live memory: the bytes held for the program's
// whole life, outside the arena, by ops registered with SetAlwaysLive
// (constants, variables), per shard.
//
// Input: the node order.
// Output: one MemoryPlan per shard (at least one; as many as the highest
// shard used + 1) with constant_bytes, variable_bytes and variables filled
// in, variables in node order; every other field is zero.
#ifndef IPUFLOW_CORE_COMPILER_ALWAYS_LIVE_H_
#define IPUFLOW_CORE_COMPILER_ALWAYS_LIVE_H_

#include <vector>

#include "core/compiler/node_order.h"
#include "core/memory_plan.h"

namespace ipuflow::compiler {

std::vector<MemoryPlan> CountAlwaysLive(const NodeOrder& order);

}  // namespace ipuflow::compiler

#endif  // IPUFLOW_CORE_COMPILER_ALWAYS_LIVE_H_
