#include "core/compiler/always_live.h"

#include "core/op_registry.h"

namespace ipuflow::compiler {

std::vector<MemoryPlan> CountAlwaysLive(const NodeOrder& order) {
  std::vector<MemoryPlan> shards(1);
  for (const Node* n : order.nodes) {
    if (static_cast<int>(shards.size()) <= ShardOf(n))
      shards.resize(ShardOf(n) + 1);
    MemoryPlan& shard = shards[ShardOf(n)];
    const AlwaysLive kind = n->op_def().always_live();
    if (kind == AlwaysLive::kVariable) {
      const int64_t bytes = n->op_def().always_live_bytes()(*n);
      shard.variable_bytes += bytes;
      shard.variables.push_back({n, bytes});
    } else if (kind == AlwaysLive::kConstant) {
      shard.constant_bytes += n->op_def().always_live_bytes()(*n);
    }
  }
  return shards;
}

}  // namespace ipuflow::compiler
