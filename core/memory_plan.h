// MemoryPlan: where a compiled program's bytes go, as the compiler's phases
// find them. IpuMemory: what one IPU holds, in the categories of the one
// memory report and check (DeviceProgram's, core/ipu/device_program.h),
// filled from the plan of what runs (a pipeline's stages, stash and
// channels included: its frame node's sub-programs). Their own header so the
// compiler's phases can fill them without depending on Program.
#ifndef IPUFLOW_CORE_MEMORY_PLAN_H_
#define IPUFLOW_CORE_MEMORY_PLAN_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/graph.h"
#include "core/graph_collections.h"

namespace ipuflow {

struct MemoryPlan {
  int64_t always_live_bytes = 0;  // Constants and variables.
  int64_t constant_bytes = 0;
  int64_t variable_bytes = 0;
  int64_t peak_bytes = 0;       // Arena: intermediates, by liveness.
  int64_t unplanned_bytes = 0;  // Sum of all intermediates without reuse.
  int64_t fetch_bytes = 0;      // Results handed back to the caller.
  int num_planned_values = 0;
  // Device loops: their bodies' constants and variables (included in the
  // always-live bytes above) and the highest body arena peak (its loop's
  // live values plus that peak are included in peak_bytes). Nested loops
  // count in their outer body.
  int64_t loop_body_always_live_bytes = 0;
  int64_t loop_body_peak_bytes = 0;
  std::string largest_loop_body;  // The loop node whose body peaks highest.
  // Every variable counted above (loop bodies' included) and its bytes.
  std::vector<std::pair<const Node*, int64_t>> variables;
  // Buffers a node's kernel holds between its sub-programs' runs (a
  // pipeline frame's activation stash and incoming FIFOs at capacity,
  // SubProgramSpec's held bytes): not always-live, not in the arena.
  int64_t stash_bytes = 0;
  int64_t fifo_bytes = 0;
  std::string DebugString() const;
};

// What one IPU of a replica holds, by category. A device program's shard
// fills the variables, constants, arena and loop bodies (FromPlan); a
// device frame (a pipeline) fills every category for the IPUs it uses.
struct IpuMemory {
  // Always-live. Variables by role: weights (trainable), gradient
  // accumulators, optimizer state kept on the IPU (slots, counters, and
  // variables of no known role).
  int64_t weights = 0;
  int64_t accumulators = 0;
  int64_t optimizer_state = 0;
  int64_t constants = 0;
  std::vector<std::pair<const Node*, int64_t>> variables;  // For "largest".
  // Offloaded optimizer state: whole, and this replica's part of it (less
  // with replicated optimizer-state sharding over `sharded_over` replicas).
  // On the IPU only during the weight update.
  bool offload = false;
  int64_t remote_state = 0;
  int64_t remote_shards = 0;
  int sharded_over = 0;
  // Not always-live: the largest program arena on this IPU (which program:
  // `arena_owner`), its values, and the weight update's arena.
  int64_t arena = 0;
  std::string arena_owner;
  int num_planned_values = 0;
  int64_t unplanned_bytes = 0;
  int64_t update_arena = 0;
  // Device loops' bodies (already in the figures above).
  int64_t loop_body_peak_bytes = 0;
  int64_t loop_body_always_live_bytes = 0;
  std::string largest_loop_body;
  // Buffers between programs: activation stash, incoming channels (FIFOs),
  // at capacity.
  int64_t stash = 0;
  int64_t fifos = 0;

  int64_t always_live() const {
    return weights + accumulators + optimizer_state + constants;
  }
  // The peak: the stages' running state, or the weight update with the
  // offloaded state streamed in, whichever is higher.
  int64_t total() const;
  // A shard of a compiled program: its variables count as weights when
  // trainable (the graph's "trainable_variables"), as accumulators when in
  // kGradientAccumulatorsCollection, else as optimizer state.
  static IpuMemory FromPlan(const MemoryPlan& plan);
  // Adds what `other` holds on the same IPU (a device frame beside the
  // program that runs it): always-live bytes and buffers add up, the
  // largest arena wins.
  void Add(const IpuMemory& other);
};

// Where one variable of optimizer state lives (the rule of pipelines and of
// the gradient-accumulation wrappers in device loops; TensorFlow IPU guide
// 6.9): with `offload`, in remote memory unless it is smaller than
// `minimum_remote_tensor_size` bytes (IPUConfig; x `replicas` with
// sharding: each replica's shard must reach the minimum), else on the IPU.
// With `shard` over `replicas` > 1 each replica keeps ceil(n/R) elements.
struct StatePlacement {
  bool remote = false;
  bool sharded = false;
  int64_t bytes = 0;          // The whole variable.
  int64_t replica_bytes = 0;  // What one replica's remote memory keeps.
};
StatePlacement PlaceOptimizerState(int64_t num_elements, DType dtype,
                                   bool offload, bool shard, int replicas,
                                   int64_t minimum_remote_tensor_size);
// Counts `p` in `m`: the remote category when remote, else optimizer state.
void CountOptimizerState(const StatePlacement& p, int replicas, IpuMemory* m);

}  // namespace ipuflow

#endif  // IPUFLOW_CORE_MEMORY_PLAN_H_
