#include "core/compiler/offsets.h"

#include <algorithm>
#include <utility>

namespace ipuflow::compiler {

ArenaLayout AssignOffsets(int num_shards,
                          std::vector<Interval>* intervals_ptr) {
  std::vector<Interval>& intervals = *intervals_ptr;
  ArenaLayout layout;
  layout.shard_bytes.assign(num_shards, 0);
  layout.shard_base.assign(num_shards, 0);
  std::vector<int> order(intervals.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    if (intervals[a].bytes != intervals[b].bytes)
      return intervals[a].bytes > intervals[b].bytes;
    return intervals[a].def < intervals[b].def;
  });
  std::vector<std::vector<int>> placed(num_shards);
  for (int i : order) {
    Interval& iv = intervals[i];
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (int j : placed[iv.shard]) {
      const Interval& o = intervals[j];
      if (o.def <= iv.last && iv.def <= o.last) {
        busy.push_back({o.shard_offset, o.shard_offset + o.bytes});
      }
    }
    std::sort(busy.begin(), busy.end());
    int64_t offset = 0;
    for (const auto& [b, e] : busy) {
      if (offset + iv.bytes <= b) break;
      offset = std::max(offset, e);
    }
    iv.shard_offset = offset;
    layout.shard_bytes[iv.shard] =
        std::max(layout.shard_bytes[iv.shard], offset + iv.bytes);
    placed[iv.shard].push_back(i);
  }
  for (int k = 0; k < num_shards; ++k) {
    layout.shard_base[k] = layout.arena_bytes;
    layout.arena_bytes += layout.shard_bytes[k];
  }
  for (Interval& iv : intervals)
    iv.offset = layout.shard_base[iv.shard] + iv.shard_offset;
  return layout;
}

}  // namespace ipuflow::compiler
