// MemoryPlan: where a compiled program's bytes go, in the categories the IPU
// memory report uses. Its own header so the compiler's phases can fill it
// without depending on Program.
#ifndef IPUFLOW_CORE_MEMORY_PLAN_H_
#define IPUFLOW_CORE_MEMORY_PLAN_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/graph.h"

namespace ipuflow {

struct MemoryPlan {
  int64_t always_live_bytes = 0;   // Constants and variables.
  int64_t constant_bytes = 0;
  int64_t variable_bytes = 0;
  int64_t peak_bytes = 0;          // Arena: intermediates, by liveness.
  int64_t unplanned_bytes = 0;     // Sum of all intermediates without reuse.
  int64_t fetch_bytes = 0;         // Results handed back to the caller.
  int num_planned_values = 0;
  // Device loops: their bodies' constants and variables (included in the
  // always-live bytes above) and the highest body arena peak (its loop's
  // live values plus that peak are included in peak_bytes). Nested loops
  // count in their outer body.
  int64_t loop_body_always_live_bytes = 0;
  int64_t loop_body_peak_bytes = 0;
  std::string largest_loop_body;   // The loop node whose body peaks highest.
  // Every variable counted above (loop bodies' included) and its bytes.
  std::vector<std::pair<const Node*, int64_t>> variables;
  std::string DebugString() const;
};

}  // namespace ipuflow

#endif  // IPUFLOW_CORE_MEMORY_PLAN_H_
