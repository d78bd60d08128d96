// Compiler phase 8, liveness: which values the arena holds and when. An
// output that forwards an input (Reshape, Identity: OpDef::forwards) aliases
// that input's buffer, so a value's consumers include its aliases'. A value
// is planned in the arena unless it is fed, fetched (or aliased by a
// fetch), always-live, a resource handle, of unknown shape or empty; its
// lifetime runs from its producer's position to its last consumer's.
//
// Input: the node order, values, shapes and the number of shards.
// Output: uses per value (what the executor counts down to free a value),
// aliases, consumers, the planned values' intervals (offsets not yet set),
// and the bytes fetched and sent between shards per run.
#ifndef IPUFLOW_CORE_COMPILER_LIVENESS_H_
#define IPUFLOW_CORE_COMPILER_LIVENESS_H_

#include <cstdint>
#include <vector>

#include "core/compiler/node_order.h"
#include "core/compiler/shapes.h"
#include "core/compiler/values.h"

namespace ipuflow::compiler {

// A planned value: its bytes (aligned) live from position `def` to `last`
// inclusive, on `shard`'s region of the arena.
struct Interval {
  int value;
  int shard;
  int def, last;
  int64_t bytes;
  int64_t shard_offset = -1;  // In the shard's region (offsets.h).
  int64_t offset = -1;        // In the arena (offsets.h).
};

struct Liveness {
  std::vector<int> uses;  // By value: consuming inputs, +1 per fetch.
  std::vector<int> root;  // By value: the value whose buffer it is.
  std::vector<std::vector<int>> consumers;  // By root value: positions.
  std::vector<Interval> intervals;          // By value id.
  int64_t fetch_bytes = 0;                  // All fetches.
  std::vector<int64_t> shard_fetch_bytes;   // Fetches produced per shard.
  int64_t cross_shard_bytes = 0;            // Values consumed on another shard.
};

Liveness ComputeLiveness(const NodeOrder& order, const Values& values,
                         const ValueTypes& types, int num_shards);

}  // namespace ipuflow::compiler

#endif  // IPUFLOW_CORE_COMPILER_LIVENESS_H_
