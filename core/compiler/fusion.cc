#include "core/compiler/fusion.h"

#include <cstdlib>
#include <cstring>

#include "absl/container/flat_hash_set.h"

namespace ipuflow::compiler {
namespace {

// Ops whose nodes never join a chain: the compiler treats their outputs or
// state specially in later phases, or the div0 trap reads the divisor by
// the op's own input index (the fused node's inputs are the chain's).
bool Plain(const Node& n) {
  const OpDef& op = n.op_def();
  return !op.is_stateful() && op.resource_access() == ResourceAccess::kNone &&
         op.forwards().empty() && !op.sub_programs() &&
         op.always_live() == AlwaysLive::kNone && !op.needs_feed() &&
         op.divisor_input() < 0;
}

// Reads of each value (+1 per fetch): an intermediate read elsewhere too
// must stay a value of its own.
std::vector<int> CountUses(const Values& values) {
  std::vector<int> uses(values.num_values, 0);
  for (const std::vector<int>& ins : values.inputs) {
    for (int v : ins) ++uses[v];
  }
  for (int v : values.fetch_values) ++uses[v];
  return uses;
}

// Nodes that must stay whole (fusion.h): targets, and nodes with control
// edges in or out.
absl::flat_hash_set<const Node*> PinnedNodes(const ProgramSpec& spec,
                                             const NodeOrder& order) {
  absl::flat_hash_set<const Node*> pinned(spec.targets.begin(),
                                          spec.targets.end());
  for (const Node* node : order.nodes) {
    for (const Node* c : node->control_inputs()) pinned.insert(c);
    if (!node->control_inputs().empty()) pinned.insert(node);
  }
  return pinned;
}

// The chain search's state: what it reads, and what it has fused so far.
struct Search {
  const NodeOrder& order;
  Values& values;
  const std::vector<int> uses;                    // CountUses.
  const absl::flat_hash_set<const Node*> pinned;  // PinnedNodes.
  std::vector<bool> absorbed;                     // By position.
  Fusion& fusion;                                 // By position.
};

// Walks `def`'s chain back from the node at `pos`; returns its positions,
// last node first, or nothing when a node before it does not fit.
std::vector<int> WalkChain(const Search& s, const FusionDef& def, int pos) {
  const Node* last = s.order.nodes[pos];
  std::vector<int> positions = {pos};
  for (int i = static_cast<int>(def.ops.size()) - 1; i > 0; --i) {
    const int in = def.chain_inputs[i - 1];
    const std::vector<int>& ins = s.values.inputs[positions.back()];
    if (in >= static_cast<int>(ins.size())) return {};
    const int v = ins[in];
    const int prod = s.values.producer[v];
    if (prod < 0) return {};
    const Node* p = s.order.nodes[prod];
    const bool fits = p->op() == def.ops[i - 1] && p->num_outputs() == 1 &&
                      v == s.values.first_output[prod] && s.uses[v] == 1 &&
                      !s.absorbed[prod] && s.fusion.chains[prod].empty() &&
                      Plain(*p) && !s.pinned.count(p) &&
                      p->ipu() == last->ipu();
    if (!fits) return {};
    positions.push_back(prod);
  }
  return positions;
}

// The fused node's inputs: the first node's, then each later node's other
// inputs, in order. `positions`: the chain's, last node first.
std::vector<int> FusedInputs(const Values& values, const FusionDef& def,
                             const std::vector<int>& positions) {
  std::vector<int> inputs = values.inputs[positions.back()];
  for (size_t i = 1; i < positions.size(); ++i) {
    const int at = positions[positions.size() - 1 - i];
    const std::vector<int>& ins = values.inputs[at];
    for (int k = 0; k < static_cast<int>(ins.size()); ++k) {
      if (k != def.chain_inputs[i - 1]) inputs.push_back(ins[k]);
    }
  }
  return inputs;
}

// Fuses `def`'s chain ending at `pos` into the node there and marks the
// others absorbed; false when the chain does not fit.
bool TryFuse(Search& s, const FusionDef* def, int pos) {
  const std::vector<int> positions = WalkChain(s, *def, pos);
  if (positions.empty()) return false;
  std::vector<const Node*> chain;
  std::vector<int> chain_values;
  for (auto it = positions.rbegin(); it != positions.rend(); ++it) {
    chain.push_back(s.order.nodes[*it]);
    chain_values.push_back(s.values.first_output[*it]);
  }
  if (def->applies && !def->applies(chain)) return false;
  s.values.inputs[pos] = FusedInputs(s.values, *def, positions);
  for (size_t i = 1; i < positions.size(); ++i) s.absorbed[positions[i]] = true;
  s.fusion.chains[pos] = std::move(chain);
  s.fusion.defs[pos] = def;
  s.fusion.chain_values[pos] = std::move(chain_values);
  s.fusion.absorbed += static_cast<int>(positions.size()) - 1;
  return true;
}

// Compacts the order: absorbed nodes leave; every value's producer becomes
// its new position. Returns `fusion` by new position.
Fusion DropAbsorbed(const std::vector<bool>& absorbed, Fusion fusion,
                    NodeOrder* order, Values* values) {
  const int n = order->size();
  std::vector<int> new_pos(n, -1);
  NodeOrder out;
  out.position.assign(order->position.size(), -1);
  Values& v = *values;
  Fusion compact;
  compact.absorbed = fusion.absorbed;
  std::vector<int> first_output;
  std::vector<std::vector<int>> inputs;
  for (int pos = 0; pos < n; ++pos) {
    if (absorbed[pos]) continue;
    new_pos[pos] = out.size();
    out.position[order->nodes[pos]->id()] = out.size();
    out.nodes.push_back(order->nodes[pos]);
    first_output.push_back(v.first_output[pos]);
    inputs.push_back(std::move(v.inputs[pos]));
    compact.chains.push_back(std::move(fusion.chains[pos]));
    compact.defs.push_back(fusion.defs[pos]);
    compact.chain_values.push_back(std::move(fusion.chain_values[pos]));
  }
  for (int& p : v.producer) {
    if (p >= 0) p = new_pos[p];
  }
  v.first_output = std::move(first_output);
  v.inputs = std::move(inputs);
  *order = std::move(out);
  return compact;
}

// A chain's intermediates lose their producer when they are written into the
// fused output (same dtype and shape: not planned); the others become values
// of the fused node that nothing reads.
void AssignIntermediates(const ValueTypes& types, const Fusion& fusion,
                         Values* values) {
  for (int pos = 0; pos < static_cast<int>(fusion.chain_values.size()); ++pos) {
    const std::vector<int>& chain = fusion.chain_values[pos];
    if (chain.empty()) continue;
    const int final_value = chain.back();
    for (size_t i = 0; i + 1 < chain.size(); ++i) {
      const int iv = chain[i];
      const bool into_output = types.shapes[iv] == types.shapes[final_value] &&
                               types.dtypes[iv] == types.dtypes[final_value];
      values->producer[iv] = into_output ? -1 : pos;
    }
  }
}

}  // namespace

bool FusionEnabled(const ProgramSpec& spec) {
  static const bool env_off = [] {
    const char* v = std::getenv("IPUFLOW_FUSION");
    return v != nullptr && std::strcmp(v, "0") == 0;
  }();
  return spec.fuse && !env_off;
}

Fusion FuseChains(const ProgramSpec& spec, const ValueTypes& types,
                  NodeOrder* order, Values* values) {
  const int n = order->size();
  Fusion fusion;
  fusion.chains.resize(n);
  fusion.defs.assign(n, nullptr);
  fusion.chain_values.resize(n);
  if (!FusionEnabled(spec)) return fusion;
  const std::vector<const FusionDef*> defs = OpRegistry::Global()->fusions();
  if (defs.empty()) return fusion;

  // Nodes last to first (fusion.h); at each, the first FusionDef that fits.
  Search s{*order,
           *values,
           CountUses(*values),
           PinnedNodes(spec, *order),
           std::vector<bool>(n, false),
           fusion};
  for (int pos = n - 1; pos >= 0; --pos) {
    const Node* last = order->nodes[pos];
    if (s.absorbed[pos] || !Plain(*last) || s.pinned.count(last)) continue;
    for (const FusionDef* def : defs) {
      if (def->ops.back() != last->op() || !def->kernel) continue;
      if (TryFuse(s, def, pos)) break;
    }
  }
  if (fusion.absorbed == 0) return fusion;
  Fusion compact = DropAbsorbed(s.absorbed, std::move(fusion), order, values);
  AssignIntermediates(types, compact, values);
  return compact;
}

}  // namespace ipuflow::compiler
