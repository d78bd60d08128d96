#include "core/compiler/liveness.h"

#include <algorithm>

#include "core/op_registry.h"
#include "core/tensor.h"

namespace ipuflow::compiler {
namespace {

int64_t AlignUp(int64_t n) {
  return (n + kTensorAlignment - 1) / kTensorAlignment * kTensorAlignment;
}

}  // namespace

Liveness ComputeLiveness(const NodeOrder& order, const Values& values,
                         const ValueTypes& types, int num_shards) {
  const int num_values = values.num_values;
  auto bytes_of = [&](int v) {
    return types.shapes[v].num_elements() * DTypeSize(types.dtypes[v]);
  };
  Liveness live;
  live.uses.assign(num_values, 0);
  live.root.resize(num_values);
  for (int v = 0; v < num_values; ++v) live.root[v] = v;
  live.consumers.resize(num_values);
  live.shard_fetch_bytes.assign(num_shards, 0);
  for (int pos = 0; pos < order.size(); ++pos) {
    const Node* n = order.nodes[pos];
    const std::vector<int>& inputs = values.inputs[pos];
    for (int v : inputs) ++live.uses[v];
    for (const auto& [out, in] : n->op_def().forwards()) {
      if (out < n->num_outputs() && in < static_cast<int>(inputs.size())) {
        live.root[values.first_output[pos] + out] = live.root[inputs[in]];
      }
    }
    for (int v : inputs) {
      live.consumers[live.root[v]].push_back(pos);
      const int producer = values.producer[v];
      if (producer >= 0 && ShardOf(order.nodes[producer]) != ShardOf(n)) {
        live.cross_shard_bytes += bytes_of(v);
      }
    }
  }
  std::vector<bool> fetched(num_values, false);
  for (int v : values.fetch_values) {
    ++live.uses[v];
    fetched[v] = true;
    fetched[live.root[v]] = true;
    live.fetch_bytes += bytes_of(v);
    if (values.producer[v] >= 0) {
      live.shard_fetch_bytes[ShardOf(order.nodes[values.producer[v]])] +=
          bytes_of(v);
    }
  }
  for (int v = 0; v < num_values; ++v) {
    const int def = values.producer[v];
    if (live.root[v] != v || def < 0 || fetched[v]) continue;
    const Node* n = order.nodes[def];
    if (n->op_def().always_live() != AlwaysLive::kNone ||
        types.dtypes[v] == DType::kResource ||
        !types.shapes[v].IsFullyDefined()) {
      continue;
    }
    if (n->op_def().forwards().count(v - values.first_output[def])) {
      continue;  // Forwarded from an unplanned value (feed or constant).
    }
    const int64_t bytes = AlignUp(bytes_of(v));
    if (bytes == 0) continue;
    int last = def;
    for (int c : live.consumers[v]) last = std::max(last, c);
    live.intervals.push_back(Interval{v, ShardOf(n), def, last, bytes});
  }
  return live;
}

}  // namespace ipuflow::compiler
