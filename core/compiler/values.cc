#include "core/compiler/values.h"

namespace ipuflow::compiler {

Values AssignValues(const NodeOrder& order, const ProgramSpec& spec,
                    const FeedIndex& feeds) {
  Values v;
  int next = 0;
  for (const Node* n : order.nodes) {
    v.first_output.push_back(next);
    next += n->num_outputs();
  }
  for (size_t i = 0; i < spec.feeds.size(); ++i)
    v.feed_values.push_back(next++);
  v.num_values = next;
  v.producer.assign(v.num_values, -1);
  for (int pos = 0; pos < order.size(); ++pos) {
    for (int k = 0; k < order.nodes[pos]->num_outputs(); ++k) {
      v.producer[v.first_output[pos] + k] = pos;
    }
  }
  auto value_of = [&](const Output& o) {
    auto it = feeds.find(o);
    if (it != feeds.end()) return v.feed_values[it->second];
    return v.first_output[order.position[o.node->id()]] + o.index;
  };
  v.inputs.resize(order.size());
  for (int pos = 0; pos < order.size(); ++pos) {
    for (const Output& in : order.nodes[pos]->inputs()) {
      v.inputs[pos].push_back(value_of(in));
    }
  }
  for (const Output& f : spec.fetches) v.fetch_values.push_back(value_of(f));
  return v;
}

}  // namespace ipuflow::compiler
