#include "core/compiler/sub_programs.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "core/op_registry.h"

namespace ipuflow::compiler {

absl::StatusOr<std::vector<SubProgramNeed>> PlanSubPrograms(
    const NodeOrder& order, const Values& values, const ValueTypes& types,
    const ProgramSpec& spec, const CompileSubProgramFn& compile,
    std::vector<MemoryPlan>* shards) {
  std::vector<SubProgramNeed> needs;
  for (int pos = 0; pos < order.size(); ++pos) {
    const Node* n = order.nodes[pos];
    const SubProgramsFn& sub_programs = n->op_def().sub_programs();
    if (!sub_programs) continue;
    std::vector<TensorShape> in_shapes;
    bool known = true;
    for (int v : values.inputs[pos]) {
      in_shapes.push_back(types.shapes[v]);
      known &= types.shapes[v].IsFullyDefined();
    }
    if (!known) continue;
    absl::StatusOr<std::vector<SubProgramSpec>> subs =
        sub_programs(*n, in_shapes, spec);
    if (!subs.ok()) {
      return absl::Status(
          subs.status().code(),
          absl::StrCat(n->DebugName(), ": ", subs.status().message()));
    }
    SubProgramNeed need{pos, {}, {}, {}};
    auto grow = [&](size_t num_shards) {
      if (shards->size() < num_shards) shards->resize(num_shards);
      need.peak.resize(shards->size(), 0);
      need.uses.resize(shards->size(), false);
      need.largest_role.resize(shards->size());
    };
    grow(shards->size());
    for (const SubProgramSpec& sub : *subs) {
      absl::StatusOr<std::vector<MemoryPlan>> sub_shards = compile(pos, sub);
      if (!sub_shards.ok()) {
        return absl::Status(sub_shards.status().code(),
                            absl::StrCat(n->DebugName(), " ", sub.role, ": ",
                                         sub_shards.status().message()));
      }
      if (sub.own_ipus) {
        grow(std::max(sub_shards->size(),
                      static_cast<size_t>(sub.held_shard) + 1));
      }
      const int num_shards = static_cast<int>(shards->size());
      for (int j = 0; j < static_cast<int>(sub_shards->size()); ++j) {
        // A sub-program shard this program does not use counts on its node's.
        const int k = j < num_shards ? j : ShardOf(n);
        const MemoryPlan& m = (*sub_shards)[j];
        MemoryPlan& shard = (*shards)[k];
        for (const auto& [var, bytes] : m.variables) {
          const bool counted = std::any_of(
              shard.variables.begin(), shard.variables.end(),
              [var = var](const auto& v) { return v.first == var; });
          if (counted) continue;  // Also used outside the loop.
          shard.variables.push_back({var, bytes});
          shard.variable_bytes += bytes;
          shard.loop_body_always_live_bytes += bytes;
        }
        shard.constant_bytes += m.constant_bytes;
        shard.loop_body_always_live_bytes += m.constant_bytes;
        shard.stash_bytes += m.stash_bytes;
        shard.fifo_bytes += m.fifo_bytes;
        // The node's programs run in turn on one IPU: the larger peak
        // counts.
        if (sub.own_ipus && m.peak_bytes > need.peak[k]) {
          need.largest_role[k] = sub.role;
        }
        need.peak[k] = std::max(need.peak[k], m.peak_bytes);
        need.uses[k] = need.uses[k] || m.peak_bytes > 0 ||
                       m.constant_bytes + m.variable_bytes > 0;
      }
      const int held = sub.held_shard < num_shards ? sub.held_shard : 0;
      (*shards)[held].stash_bytes += sub.held_stash_bytes;
      (*shards)[held].fifo_bytes += sub.held_fifo_bytes;
    }
    needs.push_back(std::move(need));
  }
  // Shards added by a later node's sub-programs: every need spans them all.
  for (SubProgramNeed& need : needs) {
    need.peak.resize(shards->size(), 0);
    need.uses.resize(shards->size(), false);
    need.largest_role.resize(shards->size());
  }
  return needs;
}

}  // namespace ipuflow::compiler
