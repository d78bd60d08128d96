// Private to Program (core/program.h): what its compile (program.cc) and its
// run (program_run.cc) share: the node table's entries and the guard that
// bounds the nesting of programs (loop bodies) on one thread.
#ifndef IPUFLOW_CORE_PROGRAM_INTERNAL_H_
#define IPUFLOW_CORE_PROGRAM_INTERNAL_H_

#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/compiler/fusion.h"
#include "core/kernel.h"
#include "core/program.h"

namespace ipuflow {

struct Program::ExecNode {
  const Node* node = nullptr;
  const KernelFn* kernel = nullptr;
  int shard = 0;
  std::vector<int> inputs;  // Value ids.
  int first_output = 0;     // Outputs are values [first_output, +n).
  std::vector<OutputPlan> plans;
  std::vector<int> successors;  // Positions in nodes_.
  int num_predecessors = 0;
  std::unique_ptr<KernelState> state;
  bool replica_identical = false;     // compiler/replica_identical.h
  std::unique_ptr<FusedChain> fused;  // compiler/fusion.h; null if unfused.
};

namespace program_internal {

// Loop bodies are programs compiled from inside the enclosing program's
// compile and run from inside its run, on the same thread: a GraphDef nesting
// loops thousands deep would overflow that thread's stack.
constexpr int kMaxNesting = 64;

class NestingGuard {
 public:
  explicit NestingGuard(int* depth) : depth_(depth) { ++*depth_; }
  ~NestingGuard() { --*depth_; }
  absl::Status Check(const char* what) const {
    if (*depth_ <= kMaxNesting) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(
        "programs nested more than ", kMaxNesting, " deep while ", what,
        " (a device loop in a loop body in a loop body ...): flatten the "
        "loops"));
  }

 private:
  int* depth_;
};

}  // namespace program_internal
}  // namespace ipuflow

#endif  // IPUFLOW_CORE_PROGRAM_INTERNAL_H_
