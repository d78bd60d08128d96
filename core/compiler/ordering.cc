#include "core/compiler/ordering.h"

namespace ipuflow::compiler {

std::set<std::pair<int, int>> ReuseEdges(const Liveness& liveness,
                                         const Values& values) {
  std::set<std::pair<int, int>> edges;
  for (const Interval& a : liveness.intervals) {
    for (const Interval& b : liveness.intervals) {
      if (a.last >= b.def) continue;
      if (a.offset >= b.offset + b.bytes || b.offset >= a.offset + a.bytes)
        continue;
      const int dst = values.producer[b.value];
      for (int c : liveness.consumers[a.value]) {
        if (c < dst) edges.insert({c, dst});
      }
    }
  }
  return edges;
}

}  // namespace ipuflow::compiler
