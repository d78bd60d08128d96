// Compiler phase 9, offsets: where each planned value lives in the arena.
// Per shard, values are placed largest first (ties: earliest defined), each
// at the lowest offset not used by an already placed value whose lifetime
// overlaps its own; values never live at once may share bytes. Each shard
// gets its own region, the regions one after another in shard order (on
// hardware they are different IPUs' memories).
//
// Input: the intervals (liveness.h) and the number of shards.
// Output: every interval's shard_offset and offset set; each region's size
// (the shard's peak) and start, and the arena's size.
#ifndef IPUFLOW_CORE_COMPILER_OFFSETS_H_
#define IPUFLOW_CORE_COMPILER_OFFSETS_H_

#include <cstdint>
#include <vector>

#include "core/compiler/liveness.h"

namespace ipuflow::compiler {

struct ArenaLayout {
  std::vector<int64_t> shard_bytes;  // By shard: its region's size.
  std::vector<int64_t> shard_base;   // By shard: its region's start.
  int64_t arena_bytes = 0;           // Sum of the regions.
};

ArenaLayout AssignOffsets(int num_shards, std::vector<Interval>* intervals);

}  // namespace ipuflow::compiler

#endif  // IPUFLOW_CORE_COMPILER_OFFSETS_H_
