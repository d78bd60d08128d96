// Device-side loops: loops::Repeat and loops::WhileLoop run a body many
// times inside one device program, without returning to the host.
//
//   // counter += 1 and d = x1 + x2, ten times, x1/x2 from an infeed:
//   ASSIGN_OR_RETURN(loops::Loop loop, loops::Repeat(scope, 10,
//       [&](const Scope& s, const std::vector<Output>& args) {
//         outfeed.Enqueue(s, {{"d", ops::Add(s, args[1], args[2])}});
//         return std::vector<Output>{ops::Add(s, args[0], one)};
//       }, {counter}, &infeed));
//   strategy.Run(graph, loop.outputs);
//
// The body receives the loop-carried values followed by the dequeued infeed
// element, and returns new loop-carried values (same number, dtypes and
// shapes). The body's nodes are built in the same graph, so it may use any
// outer value (captured as a loop-invariant input) and any variable; every
// stateful node it builds (variable updates, outfeed enqueues) runs in each
// iteration. Errors are the seed's: mismatched body outputs, an infeed
// that is given but never dequeued.
#ifndef IPUFLOW_OPS_CONTROL_LOOPS_H_
#define IPUFLOW_OPS_CONTROL_LOOPS_H_

#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "core/scope.h"

namespace ipuflow::loops {

// What a loop needs from an infeed queue (feeds::IPUInfeedQueue).
class InfeedSource {
 public:
  virtual ~InfeedSource() = default;
  // Builds, in `scope`, the dequeue of one element.
  virtual absl::StatusOr<std::vector<Output>> BuildDequeue(
      const Scope& scope) = 0;
};

using LoopBody = std::function<std::vector<Output>(const Scope&,
                                                   const std::vector<Output>&)>;
using LoopCondition =
    std::function<Output(const Scope&, const std::vector<Output>&)>;

struct Loop {
  std::vector<Output> outputs;  // Final loop-carried values.
  Node* op = nullptr;           // The loop node (a target when no outputs).
};

absl::StatusOr<Loop> Repeat(const Scope& scope, int64_t n, const LoopBody& body,
                            const std::vector<Output>& inputs = {},
                            InfeedSource* infeed = nullptr);

// Runs `body` while `condition` (a bool scalar built from the loop-carried
// values) holds, at most `maximum_iterations` times (-1: no limit).
absl::StatusOr<Loop> WhileLoop(const Scope& scope,
                               const LoopCondition& condition,
                               const LoopBody& body,
                               const std::vector<Output>& inputs = {},
                               InfeedSource* infeed = nullptr,
                               int64_t maximum_iterations = -1);

}  // namespace ipuflow::loops

#endif  // IPUFLOW_OPS_CONTROL_LOOPS_H_
