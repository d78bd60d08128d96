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

  // Reads of each value (+1 per fetch), and nodes that must stay whole.
  std::vector<int> uses(values->num_values, 0);
  for (const std::vector<int>& ins : values->inputs) {
    for (int v : ins) ++uses[v];
  }
  for (int v : values->fetch_values) ++uses[v];
  absl::flat_hash_set<const Node*> pinned(spec.targets.begin(),
                                          spec.targets.end());
  for (const Node* node : order->nodes) {
    for (const Node* c : node->control_inputs()) pinned.insert(c);
    if (!node->control_inputs().empty()) pinned.insert(node);
  }

  std::vector<bool> absorbed(n, false);
  for (int pos = n - 1; pos >= 0; --pos) {
    const Node* last = order->nodes[pos];
    if (absorbed[pos] || !Plain(*last) || pinned.count(last)) continue;
    for (const FusionDef* def : defs) {
      if (def->ops.back() != last->op() || !def->kernel) continue;
      // Walk the chain back from `last`.
      std::vector<int> positions = {pos};
      bool ok = true;
      for (int i = static_cast<int>(def->ops.size()) - 1; ok && i > 0; --i) {
        const int cur = positions.back();
        const int in = def->chain_inputs[i - 1];
        const std::vector<int>& ins = values->inputs[cur];
        if (in >= static_cast<int>(ins.size())) {
          ok = false;
          break;
        }
        const int v = ins[in];
        const int prod = values->producer[v];
        if (prod < 0) {
          ok = false;
          break;
        }
        const Node* p = order->nodes[prod];
        ok = p->op() == def->ops[i - 1] && p->num_outputs() == 1 &&
             v == values->first_output[prod] && uses[v] == 1 &&
             !absorbed[prod] && fusion.chains[prod].empty() && Plain(*p) &&
             !pinned.count(p) && p->ipu() == last->ipu();
        positions.push_back(prod);
      }
      if (!ok) continue;
      std::vector<const Node*> chain;
      std::vector<int> chain_values;
      for (auto it = positions.rbegin(); it != positions.rend(); ++it) {
        chain.push_back(order->nodes[*it]);
        chain_values.push_back(values->first_output[*it]);
      }
      if (def->applies && !def->applies(chain)) continue;
      // The fused node's inputs: the first node's, then each later node's
      // other inputs, in order.
      std::vector<int> inputs = values->inputs[positions.back()];
      for (size_t i = 1; i < chain.size(); ++i) {
        const int at = positions[positions.size() - 1 - i];
        const std::vector<int>& ins = values->inputs[at];
        for (int k = 0; k < static_cast<int>(ins.size()); ++k) {
          if (k != def->chain_inputs[i - 1]) inputs.push_back(ins[k]);
        }
      }
      values->inputs[pos] = std::move(inputs);
      for (size_t i = 1; i < positions.size(); ++i)
        absorbed[positions[i]] = true;
      fusion.chains[pos] = std::move(chain);
      fusion.defs[pos] = def;
      fusion.chain_values[pos] = std::move(chain_values);
      fusion.absorbed += static_cast<int>(positions.size()) - 1;
      break;
    }
  }
  if (fusion.absorbed == 0) return fusion;

  // Compact: absorbed nodes leave; their outputs lose their producer.
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
  for (int pos = 0; pos < out.size(); ++pos) {
    const std::vector<int>& chain = compact.chain_values[pos];
    if (chain.empty()) continue;
    const int final_value = chain.back();
    for (size_t i = 0; i + 1 < chain.size(); ++i) {
      const int iv = chain[i];
      const bool into_output = types.shapes[iv] == types.shapes[final_value] &&
                               types.dtypes[iv] == types.dtypes[final_value];
      v.producer[iv] = into_output ? -1 : pos;
    }
  }
  v.first_output = std::move(first_output);
  v.inputs = std::move(inputs);
  *order = std::move(out);
  return compact;
}

}  // namespace ipuflow::compiler
