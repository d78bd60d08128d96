#include "core/compiler/memory_report.h"

#include <algorithm>
#include <utility>

namespace ipuflow::compiler {

MemoryReport ReportMemory(const NodeOrder& order,
                          std::vector<MemoryPlan> always_live,
                          const std::vector<SubProgramNeed>& sub_programs,
                          const Liveness& liveness, const ArenaLayout& layout) {
  MemoryReport report;
  report.shards = std::move(always_live);
  std::vector<MemoryPlan>& shards = report.shards;
  for (size_t k = 0; k < shards.size(); ++k) {
    shards[k].fetch_bytes += liveness.shard_fetch_bytes[k];
    shards[k].peak_bytes = layout.shard_bytes[k];
  }
  for (const Interval& iv : liveness.intervals) {
    shards[iv.shard].unplanned_bytes += iv.bytes;
    ++shards[iv.shard].num_planned_values;
  }
  for (const SubProgramNeed& need : sub_programs) {
    for (size_t k = 0; k < need.peak.size(); ++k) {
      if (!need.uses[k]) continue;
      int64_t top = 0;  // The highest byte in use while the node runs.
      for (const Interval& iv : liveness.intervals) {
        if (iv.shard == static_cast<int>(k) && iv.def <= need.pos &&
            need.pos <= iv.last) {
          top = std::max(top, iv.shard_offset + iv.bytes);
        }
      }
      MemoryPlan& shard = shards[k];
      shard.peak_bytes = std::max(shard.peak_bytes, top + need.peak[k]);
      if (shard.largest_loop_body.empty() ||
          need.peak[k] > shard.loop_body_peak_bytes) {
        shard.loop_body_peak_bytes = need.peak[k];
        shard.largest_loop_body = order.nodes[need.pos]->name();
        if (k < need.largest_role.size() && !need.largest_role[k].empty()) {
          shard.largest_loop_body += " " + need.largest_role[k];
        }
      }
    }
  }
  MemoryPlan& m = report.total;
  m.fetch_bytes = liveness.fetch_bytes;
  for (MemoryPlan& shard : shards) {
    shard.always_live_bytes = shard.constant_bytes + shard.variable_bytes;
    m.constant_bytes += shard.constant_bytes;
    m.variable_bytes += shard.variable_bytes;
    m.always_live_bytes += shard.always_live_bytes;
    m.peak_bytes += shard.peak_bytes;
    m.unplanned_bytes += shard.unplanned_bytes;
    m.num_planned_values += shard.num_planned_values;
    m.loop_body_always_live_bytes += shard.loop_body_always_live_bytes;
    m.stash_bytes += shard.stash_bytes;
    m.fifo_bytes += shard.fifo_bytes;
    if (shard.loop_body_peak_bytes > m.loop_body_peak_bytes) {
      m.loop_body_peak_bytes = shard.loop_body_peak_bytes;
      m.largest_loop_body = shard.largest_loop_body;
    }
    m.variables.insert(m.variables.end(), shard.variables.begin(),
                       shard.variables.end());
  }
  return report;
}

}  // namespace ipuflow::compiler
