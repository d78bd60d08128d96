// Compiler phase 3, values: numbers every tensor a run handles. A scheduled
// node's outputs are consecutive values, in node order; the feeds come
// after all of them.
//
// Input: the node order and the feeds.
// Output: each node's input and first output value ids, each value's
// producer, and the value ids of the feeds and fetches.
#ifndef IPUFLOW_CORE_COMPILER_VALUES_H_
#define IPUFLOW_CORE_COMPILER_VALUES_H_

#include <vector>

#include "core/compiler/node_order.h"
#include "core/compiler/spec_check.h"
#include "core/program_spec.h"

namespace ipuflow::compiler {

struct Values {
  int num_values = 0;
  std::vector<int> first_output;         // By position: outputs [first, +n).
  std::vector<std::vector<int>> inputs;  // By position: the inputs' values.
  std::vector<int> producer;             // By value: position; -1 if fed.
  std::vector<int> feed_values;          // By feed, in spec order.
  std::vector<int> fetch_values;         // By fetch, in spec order.
};

Values AssignValues(const NodeOrder& order, const ProgramSpec& spec,
                    const FeedIndex& feeds);

}  // namespace ipuflow::compiler

#endif  // IPUFLOW_CORE_COMPILER_VALUES_H_
