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
      // A value nobody reads (an op's unused output) is still written, by
      // its producer: B must not be written before it, or the late write
      // clobbers B (TopK's unused values over a ZerosLike that took their
      // bytes, once the two ran in parallel in the wrong order).
      const int src = values.producer[a.value];
      if (liveness.consumers[a.value].empty() && src < dst) {
        edges.insert({src, dst});
      }
    }
  }
  return edges;
}

}  // namespace ipuflow::compiler
