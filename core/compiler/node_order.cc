#include "core/compiler/node_order.h"

#include <functional>
#include <map>
#include <queue>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/op_registry.h"

namespace ipuflow::compiler {

std::string ResourceKey(const Node& n) {
  const Node* src = n.input(0).node;
  if (src->op_def().always_live() == AlwaysLive::kVariable &&
      src->has_attr("shared_name") &&
      !src->attr<std::string>("shared_name").empty()) {
    return src->attr<std::string>("shared_name");
  }
  return src->name();
}

void VariableOrderEdges(const std::vector<const Node*>& nodes,
                        const std::function<void(int, int)>& edge) {
  // Per variable: its last write and the reads since.
  std::map<std::string, std::pair<int, std::vector<int>>> last_access;
  for (int to = 0; to < static_cast<int>(nodes.size()); ++to) {
    const ResourceAccess access = nodes[to]->op_def().resource_access();
    if (access == ResourceAccess::kNone) continue;
    auto& [last_write, reads] =
        last_access.try_emplace(ResourceKey(*nodes[to]), -1, std::vector<int>())
            .first->second;
    if (last_write >= 0) edge(last_write, to);
    if (access == ResourceAccess::kWrite) {
      for (int r : reads) edge(r, to);
      reads.clear();
      last_write = to;
    } else {
      reads.push_back(to);
    }
  }
}

namespace {

// The needed nodes (ids, ascending) in an order that keeps every data and
// control edge and each variable's accesses as dependencies.h orders them,
// and otherwise stays on one shard as long as it can, taking the lowest id
// first. With one shard that is id order itself.
std::vector<int> ShardAffineOrder(const Graph& graph,
                                  const std::vector<int>& ids) {
  std::vector<int> index(graph.num_nodes(), -1);
  for (size_t i = 0; i < ids.size(); ++i) index[ids[i]] = static_cast<int>(i);
  std::vector<std::vector<int>> succs(ids.size());
  std::vector<int> waiting(ids.size(), 0);
  auto edge = [&](int from, int to) {
    succs[from].push_back(to);
    ++waiting[to];
  };
  std::vector<const Node*> nodes;
  for (int id : ids) nodes.push_back(graph.node(id));
  for (int to = 0; to < static_cast<int>(nodes.size()); ++to) {
    const Node* n = nodes[to];
    for (int k = 0; k < n->num_inputs(); ++k) {
      const int from = index[n->input(k).node->id()];
      if (from >= 0) edge(from, to);  // -1: fed, its producer not needed.
    }
    for (const Node* c : n->control_inputs()) {
      if (index[c->id()] >= 0) edge(index[c->id()], to);
    }
  }
  VariableOrderEdges(nodes, edge);
  // Ready nodes per shard, lowest index first.
  using MinHeap = std::priority_queue<int, std::vector<int>, std::greater<int>>;
  std::map<int, MinHeap> ready;
  auto shard = [&](int i) { return ShardOf(graph.node(ids[i])); };
  for (size_t i = 0; i < ids.size(); ++i) {
    if (waiting[i] == 0)
      ready[shard(static_cast<int>(i))].push(static_cast<int>(i));
  }
  std::vector<int> order;
  order.reserve(ids.size());
  int current = -1;
  while (order.size() < ids.size()) {
    auto it = ready.find(current);
    if (it == ready.end() || it->second.empty()) {
      // Switch to the shard holding the lowest ready index.
      it = ready.end();
      for (auto r = ready.begin(); r != ready.end(); ++r) {
        if (!r->second.empty() &&
            (it == ready.end() || r->second.top() < it->second.top())) {
          it = r;
        }
      }
      current = it->first;
    }
    const int i = it->second.top();
    it->second.pop();
    order.push_back(ids[i]);
    for (int j : succs[i]) {
      if (--waiting[j] == 0) ready[shard(j)].push(j);
    }
  }
  return order;
}

}  // namespace

absl::StatusOr<NodeOrder> OrderNodes(const Graph& graph,
                                     const ProgramSpec& spec,
                                     const std::vector<bool>& needed) {
  std::vector<int> ids;
  for (int id = 0; id < graph.num_nodes(); ++id) {
    if (needed[id]) ids.push_back(id);
  }
  for (int id : ids) {
    const Node* n = graph.node(id);
    if (n->op_def().needs_feed()) {
      std::string fetch_names;
      for (const Output& f : spec.fetches)
        absl::StrAppend(&fetch_names, " '", f.name(), "'");
      return absl::InvalidArgumentError(
          absl::StrCat(n->DebugName(), " needs a value: feed it (fetching",
                       fetch_names, ")"));
    }
    if (n->ipu() < -1 || n->ipu() >= kMaxShards) {
      return absl::InvalidArgumentError(
          absl::StrCat(n->DebugName(), " is placed on IPU ", n->ipu(),
                       ": IPUs are numbered 0 to ", kMaxShards - 1));
    }
    if (!n->op_def().kernel()) {
      return absl::UnimplementedError(
          absl::StrCat(n->DebugName(), ": op has no kernel"));
    }
  }
  NodeOrder order;
  order.position.assign(graph.num_nodes(), -1);
  for (int id : ShardAffineOrder(graph, ids)) {
    order.position[id] = order.size();
    order.nodes.push_back(graph.node(id));
  }
  return order;
}

}  // namespace ipuflow::compiler
