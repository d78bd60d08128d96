#include "core/memory_plan.h"

#include "absl/strings/str_format.h"

namespace ipuflow {

std::string MemoryPlan::DebugString() const {
  std::string out = absl::StrFormat(
      "always-live %d B (constants %d B, variables %d B); not-always-live "
      "peak %d B (%d values, %d B without reuse); fetched %d B",
      always_live_bytes, constant_bytes, variable_bytes, peak_bytes,
      num_planned_values, unplanned_bytes, fetch_bytes);
  if (!largest_loop_body.empty()) {
    absl::StrAppendFormat(&out, "; loop bodies %d B peak ('%s'), %d B always-live",
                          loop_body_peak_bytes, largest_loop_body,
                          loop_body_always_live_bytes);
  }
  return out;
}

}  // namespace ipuflow
