#include "core/memory_plan.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace ipuflow {

std::string MemoryPlan::DebugString() const {
  std::string out = absl::StrFormat(
      "always-live %d B (constants %d B, variables %d B); not-always-live "
      "peak %d B (%d values, %d B without reuse); fetched %d B",
      always_live_bytes, constant_bytes, variable_bytes, peak_bytes,
      num_planned_values, unplanned_bytes, fetch_bytes);
  if (!largest_loop_body.empty()) {
    absl::StrAppendFormat(
        &out, "; loop bodies %d B peak ('%s'), %d B always-live",
        loop_body_peak_bytes, largest_loop_body, loop_body_always_live_bytes);
  }
  return out;
}

int64_t IpuMemory::total() const {
  return std::max(always_live() + arena + stash + fifos,
                  always_live() + remote_state + update_arena);
}

IpuMemory IpuMemory::FromPlan(const MemoryPlan& plan) {
  IpuMemory m;
  m.constants = plan.constant_bytes;
  m.variables = plan.variables;
  for (const auto& [node, bytes] : plan.variables) {
    const std::vector<Node*>& trainable =
        node->graph()->collection("trainable_variables");
    const std::vector<Node*>& accumulators =
        node->graph()->collection(kGradientAccumulatorsCollection);
    const bool is_weight =
        std::find(trainable.begin(), trainable.end(), node) != trainable.end();
    const bool is_accumulator =
        std::find(accumulators.begin(), accumulators.end(), node) !=
        accumulators.end();
    (is_weight        ? m.weights
     : is_accumulator ? m.accumulators
                      : m.optimizer_state) += bytes;
  }
  // Bytes no listed variable accounts for (none today) stay counted.
  int64_t listed = m.weights + m.accumulators + m.optimizer_state;
  if (plan.variable_bytes > listed)
    m.optimizer_state += plan.variable_bytes - listed;
  m.arena = plan.peak_bytes;
  m.num_planned_values = plan.num_planned_values;
  m.unplanned_bytes = plan.unplanned_bytes;
  m.loop_body_peak_bytes = plan.loop_body_peak_bytes;
  m.loop_body_always_live_bytes = plan.loop_body_always_live_bytes;
  m.largest_loop_body = plan.largest_loop_body;
  m.stash = plan.stash_bytes;
  m.fifos = plan.fifo_bytes;
  return m;
}

void IpuMemory::Add(const IpuMemory& o) {
  weights += o.weights;
  accumulators += o.accumulators;
  optimizer_state += o.optimizer_state;
  constants += o.constants;
  variables.insert(variables.end(), o.variables.begin(), o.variables.end());
  offload = offload || o.offload;
  remote_state += o.remote_state;
  remote_shards += o.remote_shards;
  sharded_over = std::max(sharded_over, o.sharded_over);
  if (o.arena > arena) {
    arena = o.arena;
    arena_owner = o.arena_owner;
  }
  num_planned_values += o.num_planned_values;
  unplanned_bytes += o.unplanned_bytes;
  update_arena = std::max(update_arena, o.update_arena);
  if (o.loop_body_peak_bytes > loop_body_peak_bytes) {
    loop_body_peak_bytes = o.loop_body_peak_bytes;
    largest_loop_body = o.largest_loop_body;
  }
  loop_body_always_live_bytes += o.loop_body_always_live_bytes;
  stash += o.stash;
  fifos += o.fifos;
}

StatePlacement PlaceOptimizerState(int64_t num_elements, DType dtype,
                                   bool offload, bool shard, int replicas,
                                   int64_t minimum_remote_tensor_size) {
  StatePlacement p;
  p.bytes = num_elements * static_cast<int64_t>(DTypeSize(dtype));
  p.replica_bytes = p.bytes;
  const bool sharded = offload && shard && replicas > 1;
  if (!offload ||
      p.bytes < minimum_remote_tensor_size * (sharded ? replicas : 1)) {
    return p;  // Too small to be worth a remote buffer: on the IPU.
  }
  p.remote = true;
  p.sharded = sharded;
  if (sharded) {
    p.replica_bytes = (num_elements + replicas - 1) / replicas *
                      static_cast<int64_t>(DTypeSize(dtype));
  }
  return p;
}

void CountOptimizerState(const StatePlacement& p, int replicas, IpuMemory* m) {
  if (!p.remote) {
    m->optimizer_state += p.bytes;
    return;
  }
  m->remote_state += p.bytes;
  m->remote_shards += p.replica_bytes;
  if (p.sharded) m->sharded_over = std::max(m->sharded_over, replicas);
}

}  // namespace ipuflow
